// A checkpoint's meta.json layout: what earlier tera wrote still reads (the
// fuzz corpus's valid.json is a meta.json of the first checkpoint format,
// before micro_batch was recorded), and a bad layout value is refused naming
// the file and the key.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "partition/parallel_layout_json.h"

namespace tera {
namespace {

nlohmann::json old_meta() {
  std::ifstream f(std::string(TERA_SOURCE_DIR) + "/tests/fuzz/corpus/checkpoint_meta/valid.json");
  return nlohmann::json::parse(f);
}

TEST(CheckpointMeta, AMetaJsonOfTheFirstFormatReads) {
  auto info = checkpoint_info_from_json(old_meta(), "old/meta.json");
  ASSERT_TRUE(info.ok()) << info.error();
  EXPECT_FALSE(info->layout.contains("micro_batch"));
  auto layout = layout_from_json(info->layout, "old/meta.json");
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(*layout, ParallelLayout{});
}

TEST(CheckpointMeta, TodaysLayoutRoundTrips) {
  nlohmann::json j = old_meta();
  ParallelLayout l;
  l.tp = 2;
  l.dp = 2;
  l.zero = 2;
  l.micro_batch = 2;
  j["layout"] = layout_to_json(l);
  auto info = checkpoint_info_from_json(j, "new/meta.json");
  ASSERT_TRUE(info.ok()) << info.error();
  EXPECT_EQ(checkpoint_info_to_json(*info)["layout"], layout_to_json(l));
}

TEST(CheckpointMeta, ABadLayoutValueNamesTheFileAndKey) {
  nlohmann::json j = old_meta();
  j["layout"]["zero"] = 7;
  auto info = checkpoint_info_from_json(j, "ck/step-00000020/meta.json");
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.error().find("ck/step-00000020/meta.json 'layout': layout key 'zero' = 7"), std::string::npos)
      << info.error();
}

}  // namespace
}  // namespace tera
