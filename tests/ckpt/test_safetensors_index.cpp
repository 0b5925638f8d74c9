// Sharded safetensors (ckpt/safetensors_index.h): the index reader refuses
// what Hugging Face would never write (a tensor named twice, a shard outside
// the index's directory, bad JSON) naming the file and the entry; opening an
// index checks the shards against it (each exists, each tensor exactly where
// the index says); the writer keeps every shard within its size and reads
// back bit for bit; bf16 export rounds to nearest even and widens exactly.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "ckpt/hf_gpt2.h"
#include "ckpt/safetensors.h"
#include "ckpt/safetensors_index.h"
#include "core/bf16.h"

namespace tera {
namespace {

namespace fs = std::filesystem;

std::string temp_dir(const std::string& name) {
  const std::string p = ::testing::TempDir() + "tera_stindex_" + name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

Expected<SafetensorsIndex> parse(const std::string& text) {
  return parse_safetensors_index(reinterpret_cast<const uint8_t*>(text.data()), text.size(), "m.index.json");
}

// The error of parsing `text`, which must be refused, naming the file.
std::string refused(const std::string& text) {
  auto ix = parse(text);
  EXPECT_FALSE(ix.ok()) << "accepted: " << text;
  if (ix.ok()) return "";
  EXPECT_EQ(ix.error().rfind("m.index.json: ", 0), 0u) << ix.error();
  return ix.error();
}

TEST(SafetensorsIndex, ParsesHuggingFacesIndex) {
  auto ix = parse(R"({"metadata": {"total_size": 48}, "weight_map": {
      "b": "model-00002-of-00002.safetensors", "a": "model-00001-of-00002.safetensors",
      "c": "model-00002-of-00002.safetensors"}})");
  ASSERT_TRUE(ix.ok()) << ix.error();
  EXPECT_EQ(ix->weight_map.size(), 3u);
  EXPECT_EQ(ix->weight_map.at("a"), "model-00001-of-00002.safetensors");
  EXPECT_EQ(ix->shards, (std::vector<std::string>{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}));
  ASSERT_TRUE(ix->total_size.has_value());
  EXPECT_EQ(*ix->total_size, 48u);
  EXPECT_TRUE(parse(R"({"weight_map": {"a": "x.safetensors"}})").ok());  // metadata is optional
}

TEST(SafetensorsIndex, TensorNamedTwiceIsRefusedNamingBothShards) {
  // JSON's duplicate key: a plain parse would keep the second silently.
  const std::string e = refused(R"({"weight_map": {"w": "one.safetensors", "v": "one.safetensors", "w": "two.safetensors"}})");
  EXPECT_NE(e.find("'w' is named twice"), std::string::npos) << e;
  EXPECT_NE(e.find("one.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("two.safetensors"), std::string::npos) << e;
}

TEST(SafetensorsIndex, ShardOutsideTheDirectoryIsRefused) {
  for (const char* shard : {"../x.safetensors", "sub/x.safetensors", "/etc/x.safetensors", "..", ".", "",
                            "a\\\\b.safetensors"}) {
    const std::string e = refused(std::string(R"({"weight_map": {"t": ")") + shard + "\"}}");
    EXPECT_NE(e.find("weight_map[\"t\"]"), std::string::npos) << e;
    EXPECT_NE(e.find("plain file name"), std::string::npos) << e;
  }
  EXPECT_NE(refused(R"({"weight_map": {"t": "x.bin"}})").find("not a .safetensors file"), std::string::npos);
}

TEST(SafetensorsIndex, MalformedIndexesAreRefused) {
  EXPECT_NE(refused("{\"weight_map\": {\"a\": ").find("not valid JSON"), std::string::npos);
  EXPECT_NE(refused("[1, 2]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(refused("{}").find("weight_map is missing"), std::string::npos);
  EXPECT_NE(refused(R"({"weight_map": []})").find("weight_map is missing or not an object"), std::string::npos);
  EXPECT_NE(refused(R"({"weight_map": {}})").find("weight_map is empty"), std::string::npos);
  EXPECT_NE(refused(R"({"weight_map": {"a": 3}})").find("weight_map[\"a\"] is not a string"), std::string::npos);
  EXPECT_NE(refused(R"({"weight_map": {"a": {"b": "x.safetensors"}}})").find("is not a string"), std::string::npos);
  EXPECT_NE(refused(R"({"metadata": {"total_size": -1}, "weight_map": {"a": "x.safetensors"}})").find("total_size"),
            std::string::npos);
  EXPECT_NE(refused(std::string(kMaxSafetensorsIndexBytes + 1, ' ')).find("bytes, more than"), std::string::npos);
}

// Shards a.safetensors {x, y} and b.safetensors {z} in `dir`.
void write_two_shards(const std::string& dir, const std::vector<float>& v) {
  ASSERT_TRUE(write_safetensors(dir + "/a.safetensors", {{"x", "F32", {2}, v.data(), 8}, {"y", "F32", {1}, v.data() + 2, 4}}).ok());
  ASSERT_TRUE(write_safetensors(dir + "/b.safetensors", {{"z", "F32", {3}, v.data() + 3, 12}}).ok());
}

TEST(SafetensorsIndex, OpensTheShardsAsOneModel) {
  const std::string dir = temp_dir("open");
  const std::vector<float> v = {1, 2, 3, 4, 5, 6};
  write_two_shards(dir, v);
  write_text(dir + "/m.safetensors.index.json",
             R"({"metadata": {"total_size": 24}, "weight_map": {"x": "a.safetensors", "y": "a.safetensors", "z": "b.safetensors"}})");
  auto f = SafetensorsFile::open(dir + "/m.safetensors.index.json");
  ASSERT_TRUE(f.ok()) << f.error();
  ASSERT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->shard_paths(), (std::vector<std::string>{dir + "/a.safetensors", dir + "/b.safetensors"}));
  std::vector<float> z(3);
  ASSERT_TRUE(read_tensor_f32(*f, *f->find("z"), z.data()).is_ok());
  EXPECT_EQ(z, (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(f->path_of(*f->find("z")), dir + "/b.safetensors");
  EXPECT_EQ(f->path_of(*f->find("x")), dir + "/a.safetensors");
}

std::string open_error(const std::string& dir, const std::string& index_json) {
  write_text(dir + "/m.safetensors.index.json", index_json);
  auto f = SafetensorsFile::open(dir + "/m.safetensors.index.json");
  EXPECT_FALSE(f.ok()) << index_json;
  if (f.ok()) return "";
  EXPECT_NE(f.error().find(dir + "/m.safetensors.index.json"), std::string::npos) << f.error();
  return f.error();
}

TEST(SafetensorsIndex, ShardsThatDisagreeWithTheIndexAreRefused) {
  const std::string dir = temp_dir("disagree");
  const std::vector<float> v = {1, 2, 3, 4, 5, 6};
  write_two_shards(dir, v);
  // A missing shard: named, with a tensor the index puts there.
  std::string e = open_error(dir, R"({"weight_map": {"x": "a.safetensors", "y": "a.safetensors", "z": "b.safetensors",
                                                     "w": "c.safetensors"}})");
  EXPECT_NE(e.find("shard c.safetensors is missing"), std::string::npos) << e;
  EXPECT_NE(e.find("'w'"), std::string::npos) << e;
  // A tensor the index puts in a shard that does not hold it (in no shard).
  e = open_error(dir, R"({"weight_map": {"x": "a.safetensors", "y": "a.safetensors", "z": "b.safetensors",
                                         "q": "b.safetensors"}})");
  EXPECT_NE(e.find("'q' in b.safetensors, but that shard does not hold it"), std::string::npos) << e;
  // A tensor in another shard than the index says: both named.
  e = open_error(dir, R"({"weight_map": {"x": "a.safetensors", "y": "b.safetensors", "z": "b.safetensors"}})");
  EXPECT_NE(e.find("'y' is in shard a.safetensors, but weight_map puts it in b.safetensors"), std::string::npos) << e;
  // A tensor of a shard the index does not list.
  e = open_error(dir, R"({"weight_map": {"x": "a.safetensors", "z": "b.safetensors"}})");
  EXPECT_NE(e.find("'y' of shard a.safetensors is not in the index"), std::string::npos) << e;
  // A tensor in two shards: the second shard's copy is not where the index says.
  ASSERT_TRUE(write_safetensors(dir + "/b.safetensors", {{"z", "F32", {3}, v.data() + 3, 12},
                                                         {"x", "F32", {2}, v.data(), 8}}).ok());
  e = open_error(dir, R"({"weight_map": {"x": "a.safetensors", "y": "a.safetensors", "z": "b.safetensors"}})");
  EXPECT_NE(e.find("'x' is in shard b.safetensors, but weight_map puts it in a.safetensors"), std::string::npos) << e;
}

// Tensors t0..t{n-1} of sizes[i] floats each, valued by position.
struct Tensors {
  std::vector<std::vector<float>> data;
  std::vector<StTensorRef> refs;
  explicit Tensors(const std::vector<int64_t>& sizes) {
    data.reserve(sizes.size());
    float next = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      data.emplace_back(static_cast<size_t>(sizes[i]));
      for (float& x : data.back()) x = next++ * 0.25f;
      refs.push_back({"t" + std::to_string(i), "F32", {sizes[i]}, data.back().data(), data.back().size() * 4});
    }
  }
};

TEST(SafetensorsIndex, WriterKeepsEveryShardWithinItsSizeAndReadsBack) {
  const std::string dir = temp_dir("write");
  const Tensors t({10, 3, 7, 40, 2, 2, 9});  // 40 floats: larger than a shard, alone in its own
  const uint64_t max = 12 * 4;
  // Greedy in order: {10}, {3, 7}, {40}, {2, 2}, {9} (adding 9 to {2, 2} would make 13 floats).
  EXPECT_EQ(plan_safetensors_shards(t.refs, max), (std::vector<size_t>{0, 1, 3, 4, 6}));
  auto written = write_safetensors_sharded(dir + "/model.safetensors", t.refs, {{"format", "pt"}}, max);
  ASSERT_TRUE(written.ok()) << written.error();
  ASSERT_EQ(written->size(), 6u);
  EXPECT_EQ(written->front(), dir + "/model-00001-of-00005.safetensors");
  EXPECT_EQ((*written)[4], dir + "/model-00005-of-00005.safetensors");
  EXPECT_EQ(written->back(), dir + "/model.safetensors.index.json");
  EXPECT_FALSE(fs::exists(dir + "/model.safetensors"));
  EXPECT_EQ(*written, safetensors_sharded_paths(dir + "/model.safetensors", 5));
  for (size_t s = 0; s + 1 < written->size(); ++s) {
    auto shard = SafetensorsFile::open((*written)[s]);
    ASSERT_TRUE(shard.ok()) << shard.error();
    uint64_t bytes = 0;
    for (const StTensorRef& r : shard->tensors()) bytes += r.bytes;
    EXPECT_TRUE(bytes <= max || shard->tensors().size() == 1) << (*written)[s] << ": " << bytes << " tensor bytes";
    EXPECT_EQ(shard->metadata().at("format"), "pt");
  }
  auto index = read_safetensors_index(written->back());
  ASSERT_TRUE(index.ok()) << index.error();
  EXPECT_EQ(*index->total_size, 73u * 4);
  EXPECT_EQ(index->weight_map.at("t3"), "model-00003-of-00005.safetensors");
  auto all = SafetensorsFile::open(written->back());
  ASSERT_TRUE(all.ok()) << all.error();
  ASSERT_EQ(all->tensors().size(), t.refs.size());
  for (size_t i = 0; i < t.refs.size(); ++i) {
    const StTensorRef* r = all->find(t.refs[i].name);
    ASSERT_NE(r, nullptr) << t.refs[i].name;
    EXPECT_EQ(r->shape, t.refs[i].shape);
    EXPECT_EQ(0, std::memcmp(r->data, t.data[i].data(), r->bytes)) << r->name;
  }
  // Within one shard: the one file, no index.
  const std::string one = temp_dir("write_one");
  written = write_safetensors_sharded(one + "/model.safetensors", t.refs, {}, 73 * 4);
  ASSERT_TRUE(written.ok()) << written.error();
  EXPECT_EQ(*written, std::vector<std::string>{one + "/model.safetensors"});
  EXPECT_FALSE(fs::exists(one + "/model.safetensors.index.json"));
}

TEST(SafetensorsIndex, Bf16ExportRoundsToNearestEvenAndImportWidensExactly) {
  const std::string dir = temp_dir("bf16");
  // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: ties to even (1);
  // 1 + 3 * 2^-8 ties up to 1 + 2^-6; 1 + 2^-8 + 2^-20 is above halfway.
  const float up_tie = 1.0f + 3.0f / 256, even_tie = 1.0f + 1.0f / 256, above = 1.0f + 1.0f / 256 + 1.0f / (1 << 20);
  std::vector<float> v = {even_tie, up_tie, above, -2.5f, 3.0e-38f, 65504.0f, 1.0e38f, 0.1f};
  HfExportOptions opt;
  opt.bf16 = true;
  opt.max_shard_bytes = 4 * 2;  // bf16 bytes: two shards of 4 values
  auto written = write_hf_weights({{"a", "F32", {4}, v.data(), 16}, {"b", "F32", {4}, v.data() + 4, 16}},
                                  dir + "/model.safetensors", opt);
  ASSERT_TRUE(written.ok()) << written.error();
  ASSERT_EQ(written->size(), 3u);  // two shards and the index
  auto f = SafetensorsFile::open(written->back());
  ASSERT_TRUE(f.ok()) << f.error();
  std::vector<float> back(8);
  ASSERT_EQ(f->find("a")->dtype, "BF16");
  ASSERT_TRUE(read_tensor_f32(*f, *f->find("a"), back.data()).is_ok());
  ASSERT_TRUE(read_tensor_f32(*f, *f->find("b"), back.data() + 4).is_ok());
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], 1.0f + 1.0f / 64);
  EXPECT_EQ(back[2], 1.0f + 1.0f / 128);
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(back[i], bf16_widen(bf16_nearest(v[i]))) << i;                       // exact widening
    // bf16 keeps 8 significant bits: nearest rounding errs by at most 2^-8 relative (half an ulp).
    EXPECT_LE(std::abs(back[i] - v[i]), std::abs(v[i]) * std::ldexp(1.0f, -8)) << i;
  }
}

TEST(SafetensorsIndex, ShardSizesParseAsHuggingFaceWritesThem) {
  EXPECT_EQ(*parse_shard_size("5GB", "--max-shard-size"), 5'000'000'000u);
  EXPECT_EQ(*parse_shard_size("10MB", "--max-shard-size"), 10'000'000u);
  EXPECT_EQ(*parse_shard_size("2KiB", "--max-shard-size"), 2048u);
  EXPECT_EQ(*parse_shard_size("3gib", "--max-shard-size"), uint64_t{3} << 30);
  EXPECT_EQ(*parse_shard_size("777", "--max-shard-size"), 777u);
  for (const char* bad : {"", "GB", "5TB", "-1", "0", "1.5GB", "99999999999999999GiB"}) {
    auto n = parse_shard_size(bad, "--max-shard-size");
    ASSERT_FALSE(n.ok()) << bad;
    EXPECT_EQ(n.error().rfind("--max-shard-size ", 0), 0u) << n.error();
  }
}

}  // namespace
}  // namespace tera
