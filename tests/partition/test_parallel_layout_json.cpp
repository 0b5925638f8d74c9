// layout_to_json / layout_from_json (partition/parallel_layout_json.h): a round
// trip over many layouts, every layout object older tera wrote into a
// checkpoint's meta.json still read, and bad values refused naming the file
// and the key.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "partition/parallel_layout_json.h"

namespace tera {
namespace {

TEST(LayoutJson, RoundTripKeepsEveryField) {
  std::vector<ParallelLayout> layouts;
  layouts.push_back(ParallelLayout{});
  for (int tp : {1, 2, 8}) {
    for (int pp : {1, 4}) {
      for (int zero : {0, 1, 3}) {
        ParallelLayout l;
        l.tp = tp;
        l.pp = pp;
        l.dp = 3;
        l.cp = tp == 8 ? 2 : 1;
        l.vpp = pp > 1 ? 2 : 1;
        l.micro_batch = 4;
        l.zero = zero;
        l.sequence_parallel = tp > 1;
        l.recompute = zero == 3 ? Recompute::full : zero == 1 ? Recompute::selective : Recompute::none;
        l.schedule = pp > 1 ? ScheduleKind::interleaved : ScheduleKind::gpipe;
        if (pp > 1) l.stage_layers = {3, 2, 2, 1, 1, 1, 1, 1};
        layouts.push_back(l);
      }
    }
  }
  for (const ParallelLayout& l : layouts) {
    const nlohmann::json j = layout_to_json(l);
    auto back = layout_from_json(j, "x.json");
    ASSERT_TRUE(back.ok()) << back.error();
    EXPECT_EQ(*back, l) << j.dump();
    // Through text, as files hold it.
    auto reread = layout_from_json(nlohmann::json::parse(j.dump()), "x.json");
    ASSERT_TRUE(reread.ok());
    EXPECT_EQ(*reread, l);
  }
}

TEST(LayoutJson, WritesTheLongKeys) {
  const nlohmann::json j = layout_to_json(ParallelLayout{});
  for (const char* key : {"tp", "pp", "dp", "cp", "vpp", "micro_batch", "zero", "sequence_parallel", "recompute",
                          "schedule", "stage_layers"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j.size(), 11u);
  EXPECT_EQ(j["schedule"], "1f1b");
  EXPECT_EQ(j["recompute"], "none");
}

// The layout objects earlier tera wrote into meta.json, verbatim.
TEST(LayoutJson, ReadsEveryLayoutEarlierVersionsWrote) {
  // The trainer before micro_batch was recorded (tests/fuzz/corpus/checkpoint_meta/valid.json).
  auto first = layout_from_json(nlohmann::json::parse(R"({"dp": 1, "pp": 1, "schedule": "1f1b",
      "sequence_parallel": false, "stage_layers": [], "tp": 1, "vpp": 1, "zero": 0})"), "meta.json");
  ASSERT_TRUE(first.ok()) << first.error();
  EXPECT_EQ(*first, ParallelLayout{});
  // The trainer since 2026-12-02 (micro_batch added; no cp or recompute).
  auto trainer = layout_from_json(nlohmann::json::parse(R"({"dp": 2, "pp": 2, "schedule": "interleaved",
      "sequence_parallel": true, "stage_layers": [1, 1, 1, 1], "tp": 2, "vpp": 2, "zero": 1, "micro_batch": 2})"),
                                  "meta.json");
  ASSERT_TRUE(trainer.ok()) << trainer.error();
  EXPECT_EQ(trainer->tp, 2);
  EXPECT_EQ(trainer->pp, 2);
  EXPECT_EQ(trainer->dp, 2);
  EXPECT_EQ(trainer->vpp, 2);
  EXPECT_EQ(trainer->zero, 1);
  EXPECT_EQ(trainer->micro_batch, 2);
  EXPECT_TRUE(trainer->sequence_parallel);
  EXPECT_EQ(trainer->schedule, ScheduleKind::interleaved);
  EXPECT_EQ(trainer->stage_layers, (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(trainer->cp, 1);
  EXPECT_EQ(trainer->recompute, Recompute::none);
  // `ckpt reshard`'s first layouts: tp, pp, dp, zero, vpp and the source's
  // layout nested; no schedule (it follows vpp, as in layout strings).
  auto reshard = layout_from_json(nlohmann::json::parse(R"({"tp": 2, "pp": 2, "dp": 1, "zero": 0, "vpp": 2,
      "resharded_from": {"tp": 1, "pp": 1, "dp": 1, "zero": 0}})"), "meta.json");
  ASSERT_TRUE(reshard.ok()) << reshard.error();
  EXPECT_EQ(reshard->schedule, ScheduleKind::interleaved);
  EXPECT_EQ(reshard->micro_batch, 1);
  // `ckpt reshard` since: schedule and stage_layers; micro_batch copied when the source had it.
  auto reshard2 = layout_from_json(nlohmann::json::parse(R"({"tp": 1, "pp": 2, "dp": 1, "zero": 0, "vpp": 1,
      "schedule": "1f1b", "stage_layers": [1, 3], "micro_batch": 2, "resharded_from": {"tp": 2}})"), "meta.json");
  ASSERT_TRUE(reshard2.ok()) << reshard2.error();
  EXPECT_EQ(reshard2->stage_layers, (std::vector<int64_t>{1, 3}));
  // An empty object (no layout recorded) is the default layout.
  auto none = layout_from_json(nlohmann::json::object(), "meta.json");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, ParallelLayout{});
  // dp = 0 (not known) is kept.
  auto unknown_dp = layout_from_json(nlohmann::json::parse(R"({"dp": 0})"), "meta.json");
  ASSERT_TRUE(unknown_dp.ok());
  EXPECT_EQ(unknown_dp->dp, 0);
}

TEST(LayoutJson, BadValuesNameTheFileAndTheKey) {
  struct Case {
    const char* json;
    const char* needle;
  };
  for (const Case& c : {Case{R"({"tp": 0})", "'tp' = 0 must be an integer in [1, "},
                        Case{R"({"tp": "2"})", "'tp' = \"2\""},
                        Case{R"({"pp": 1.5})", "'pp' = 1.5"},
                        Case{R"({"dp": -1})", "'dp' = -1 must be an integer in [0, "},
                        Case{R"({"zero": 4})", "'zero' = 4 must be an integer in [0, 3]"},
                        Case{R"({"micro_batch": 0})", "'micro_batch' = 0"},
                        Case{R"({"sequence_parallel": 1})", "'sequence_parallel' = 1 must be true or false"},
                        Case{R"({"recompute": "some"})", "'recompute' = \"some\" must be \"none\""},
                        Case{R"({"schedule": "zb"})", "'schedule' = \"zb\" must be \"gpipe\""},
                        Case{R"({"stage_layers": [1, -2]})", "'stage_layers' = [1,-2] must be a list"},
                        Case{R"({"stage_layers": 3})", "'stage_layers' = 3"}}) {
    auto r = layout_from_json(nlohmann::json::parse(c.json), "ck/step-00000004/meta.json 'layout'");
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_NE(r.error().find("ck/step-00000004/meta.json 'layout': layout key "), std::string::npos) << r.error();
    EXPECT_NE(r.error().find(c.needle), std::string::npos) << r.error();
  }
  auto not_object = layout_from_json(nlohmann::json::array(), "m.json");
  ASSERT_FALSE(not_object.ok());
  EXPECT_NE(not_object.error().find("m.json: the layout must be a JSON object"), std::string::npos);
}

}  // namespace
}  // namespace tera
