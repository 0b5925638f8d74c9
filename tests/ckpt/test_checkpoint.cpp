// safetensors and model checkpoints: round trip, atomic replacement, and
// every kind of corruption reported with the file named.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "ckpt/model_checkpoint.h"
#include "ckpt/safetensors.h"
#include "core/file_util.h"
#include "kernels/backend.h"
#include "model/gpt.h"

namespace tera {
namespace {

namespace fs = std::filesystem;

std::string temp_path(const std::string& name) {
  const std::string p = ::testing::TempDir() + "tera_ckpt_" + name;
  fs::remove_all(p);
  return p;
}

TEST(Safetensors, RoundTrip) {
  const std::string p = temp_path("rt.safetensors");
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  std::vector<int32_t> b = {7, -8};
  auto crc = write_safetensors(p, {{"a", "F32", {2, 3}, a.data(), 24}, {"b", "I32", {2}, b.data(), 8}}, {{"k", "v"}});
  ASSERT_TRUE(crc.ok()) << crc.error();
  auto f = SafetensorsFile::open(p);
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->crc32(), *crc);
  ASSERT_EQ(f->tensors().size(), 2u);
  const StTensorRef* ta = f->find("a");
  ASSERT_NE(ta, nullptr);
  EXPECT_EQ(ta->shape, (Shape{2, 3}));
  EXPECT_EQ(0, std::memcmp(ta->data, a.data(), 24));
  EXPECT_EQ(f->metadata().at("k"), "v");
  EXPECT_FALSE(fs::exists(p + ".tmp." + std::to_string(getpid())));
}

Status parse(const std::string& bytes) {
  std::vector<StTensorRef> t;
  return parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "x.safetensors", &t, nullptr);
}

std::string with_header(const std::string& json, size_t data_bytes) {
  std::string s(8, '\0');
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(n >> (8 * i));
  return s + json + std::string(data_bytes, '\0');
}

TEST(Safetensors, RejectsMalformedHeaders) {
  auto expect = [](const std::string& bytes, const std::string& needle) {
    Status s = parse(bytes);
    ASSERT_FALSE(s.is_ok()) << "accepted: " << needle;
    EXPECT_NE(s.message().find("x.safetensors"), std::string::npos);
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  };
  expect("abc", "too short");
  expect(with_header(std::string(1000, ' '), 0).substr(0, 8) + std::string(4, 'x'),
         "not a safetensors file: it is binary data of another format (read as safetensors, its header would be 1000 "
         "bytes of a 12-byte file)");
  expect(with_header("{not json}", 0), "not valid JSON");
  expect(with_header("[1]", 0), "not a safetensors file");  // a header must begin with '{'
  expect("The first line of a text file\nand more", "not a safetensors file: it is a text file (it begins \"The first");
  expect(with_header(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4), "outside the data section");
  expect(with_header(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "needs 12");
  expect(with_header(R"({"t":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", 8), "unknown dtype");
  expect(with_header(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), "negative");
  expect(with_header(R"({"t":{"dtype":"F32","shape":[2]}})", 8), "lacks");
  expect(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12),
         "overlap");
}

struct Tiny {
  ModelConfig cfg{.layers = 1, .hidden = 8, .heads = 2, .seq_len = 4, .vocab = 13, .ffn_hidden = 0, .vocab_align = 8};
};

TEST(ModelCheckpoint, SaveLoadRoundTripAndReplace) {
  Tiny t;
  Gpt a(ModelSpec(t.cfg), cpu_backend(), 1), b(ModelSpec(t.cfg), cpu_backend(), 1);
  a.init_parameters(1);
  // Its own parent directory: the temporaries check below must not see other
  // tests' files in the shared temp directory (ctest -j runs them beside it).
  const std::string parent = temp_path("replace_parent");
  fs::create_directories(parent);
  const std::string dir = parent + "/model";
  CheckpointMeta meta{.model = t.cfg, .step = 7};
  ASSERT_TRUE(save_model_checkpoint(dir, a.table(), a.params(), meta).is_ok());
  // Saving again replaces the directory atomically.
  a.params()[0] += 1.0f;
  ASSERT_TRUE(save_model_checkpoint(dir, a.table(), a.params(), meta).is_ok());
  auto m = read_checkpoint_meta(dir);
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_EQ(m->step, 7);
  EXPECT_EQ(m->model, t.cfg);
  ASSERT_TRUE(load_model_weights(dir, b.table(), b.params()).is_ok());
  EXPECT_EQ(0, std::memcmp(a.params(), b.params(), static_cast<size_t>(a.table().total_floats()) * 4));
  for (const auto& e : fs::directory_iterator(fs::path(dir).parent_path())) {
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << "left a temporary: " << e.path();
  }
}

TEST(ModelCheckpoint, FlippedByteIsDetected) {
  Tiny t;
  Gpt a(ModelSpec(t.cfg), cpu_backend(), 1);
  a.init_parameters(2);
  const std::string dir = temp_path("flip");
  ASSERT_TRUE(save_model_checkpoint(dir, a.table(), a.params(), CheckpointMeta{.model = t.cfg}).is_ok());
  const std::string f = dir + "/model.safetensors";
  {
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    io.seekg(-3, std::ios::end);
    char c;
    io.read(&c, 1);
    c ^= 0x10;
    io.seekp(-3, std::ios::end);
    io.write(&c, 1);
  }
  Status s = load_model_weights(dir, a.table(), a.params());
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("checksum mismatch"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("model.safetensors"), std::string::npos);
}

TEST(ModelCheckpoint, TruncatedFileAndWrongShapeAreReported) {
  Tiny t;
  Gpt a(ModelSpec(t.cfg), cpu_backend(), 1);
  a.init_parameters(2);
  const std::string dir = temp_path("trunc");
  ASSERT_TRUE(save_model_checkpoint(dir, a.table(), a.params(), CheckpointMeta{.model = t.cfg}).is_ok());
  fs::resize_file(dir + "/model.safetensors", fs::file_size(dir + "/model.safetensors") - 100);
  Status s = load_model_weights(dir, a.table(), a.params());
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.message();

  // A model of another shape: the tensor named with both shapes.
  const std::string dir2 = temp_path("shape");
  ASSERT_TRUE(save_model_checkpoint(dir2, a.table(), a.params(), CheckpointMeta{.model = t.cfg}).is_ok());
  ModelConfig other = t.cfg;
  other.hidden = 12;
  other.heads = 3;
  Gpt b(ModelSpec(other), cpu_backend(), 1);
  s = load_model_weights(dir2, b.table(), b.params());
  ASSERT_FALSE(s.is_ok());
  // The first tensor whose shape differs is named with both shapes (wte: [13, 8] saved, [13, 12] expected).
  EXPECT_NE(s.message().find("'wte.weight' is F32 [13, 8], expected F32 [13, 12]"), std::string::npos) << s.message();
}

TEST(ModelCheckpoint, MetaErrors) {
  const std::string dir = temp_path("meta");
  fs::create_directories(dir);
  auto m = read_checkpoint_meta(dir);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().find("not a tera checkpoint"), std::string::npos);
  std::ofstream(dir + "/meta.json") << R"({"format":"tera-model","version":99})";
  m = read_checkpoint_meta(dir);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().find("unsupported format version 99"), std::string::npos) << m.error();
  std::ofstream(dir + "/meta.json") << "{oops";
  EXPECT_NE(read_checkpoint_meta(dir).error().find("not valid JSON"), std::string::npos);
}

}  // namespace
}  // namespace tera
