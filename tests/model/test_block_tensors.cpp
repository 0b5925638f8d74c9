// model/block_tensors.h: its tables match ModelSpec's lists by name, and a
// list with a tensor the table lacks (or the other way round) fails loudly.
#include "model/block_tensors.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <string>
#include <vector>

#include "model/model_spec.h"

namespace tera {
namespace {

ModelConfig small(MlpKind mlp = MlpKind::standard) {
  return ModelConfig{.layers = 2, .hidden = 16, .heads = 4, .seq_len = 8, .vocab = 50, .mlp = mlp};
}

// ModelSpec's parameters of block `layer`, less the "h.<layer>." prefix.
std::vector<std::string> block_param_names(const ModelSpec& spec, int layer) {
  const std::string prefix = "h." + std::to_string(layer) + ".";
  std::vector<std::string> names;
  for (const auto& p : spec.params()) {
    if (p.layer == layer) names.push_back(p.name.substr(prefix.size()));
  }
  return names;
}

std::vector<std::string> names_of(const std::vector<BufferInfo>& table) {
  std::vector<std::string> names;
  for (const auto& b : table) names.push_back(b.name);
  return names;
}

TEST(BlockTensors, WeightRowsMatchModelSpecParameters) {
  const ModelSpec spec(small());
  for (int l = 0; l < 2; ++l) {
    const std::vector<std::string> names = block_param_names(spec, l);
    const std::vector<size_t> row = match_rows(kBlockWeightRows, names, "test");
    ASSERT_EQ(row.size(), kBlockWeightRows.size() - 2);  // all but the gate's two optional rows
    for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(kBlockWeightRows[row[i]].name, names[i]);
  }
}

TEST(BlockTensors, ActRowsMatchBlockActivations) {
  // A GPT-2 block has every row but one of the attention's optional pair
  // (probs, naive; softmax_lse, flash), the SwiGLU pair (fch_gate,
  // fch_swiglu) and the split backward's nine dw_ rows; with the split
  // backward every dw_ row but the gate's.
  const ModelSpec spec(small());
  for (bool sp : {false, true}) {
    for (bool flash : {false, true}) {
      const ActivationOptions o{.tp = 2, .sequence_parallel = sp, .flash_attention = flash};
      const auto rows = match_rows(kBlockActRows, names_of(spec.block_activations(2, 8, o)), "test");
      EXPECT_EQ(rows.size(), kBlockActRows.size() - 12);
      EXPECT_EQ(match_rows(kBlockActRows, names_of(spec.saved_block_activations(2, 8, o)), "test").size(),
                kBlockActRows.size() - 12);
      ActivationOptions split = o;
      split.defer_weight_grads = true;
      EXPECT_EQ(match_rows(kBlockActRows, names_of(spec.saved_block_activations(2, 8, split)), "test").size(),
                kBlockActRows.size() - 4);
      const bool has_lse = std::any_of(rows.begin(), rows.end(), [](size_t r) { return kBlockActRows[r].name == "softmax_lse"; });
      EXPECT_EQ(has_lse, flash);
    }
  }
  const ActivationOptions full{.recompute = Recompute::full};
  EXPECT_EQ(match_rows(kFullRecomputeSavedRows, names_of(spec.saved_block_activations(2, 8, full)), "test").size(), 1u);
}

TEST(BlockTensors, BindByNameFollowsNamesNotPositions) {
  float a = 0, b = 0;
  // Listed in the reverse of the table's order: each view still lands in its named field.
  std::vector<std::string> names;
  std::vector<TypedView> views;
  for (size_t r = kBlockActRows.size(); r-- > 0;) {
    if (kBlockActRows[r].name == "softmax_lse") continue;  // an optional row left out: its field stays empty
    names.emplace_back(kBlockActRows[r].name);
    views.emplace_back(names.back() == "qkv" ? &a : &b);
  }
  const BlockActs acts = bind_by_name(kBlockActRows, names, views, "test");
  EXPECT_EQ(acts.qkv.f32(), &a);
  EXPECT_EQ(acts.ln1.f32(), &b);
  EXPECT_EQ(acts.out.f32(), &b);
  EXPECT_TRUE(acts.lse.empty());
}

TEST(BlockTensors, Bf16BuffersBindTheirBf16Fields) {
  // Under bf16 GEMMs ln1, ln2, fch and fch_gelu are bf16 buffers: their
  // fields hold bf16 views (read as fp32 they assert); a bf16 buffer on a
  // row that binds only fp32 (the residual stream's out) asserts.
  float f = 0;
  uint16_t h = 0;
  std::vector<std::string> names;
  std::vector<TypedView> views;
  for (const auto& row : kBlockActRows) {
    if (row.optional && row.name != "fch_gelu") continue;
    names.emplace_back(row.name);
    const bool half = row.name == "ln1" || row.name == "ln2" || row.name == "fch" || row.name == "fch_gelu";
    views.push_back(half ? TypedView(&h) : TypedView(&f));
  }
  const BlockActs acts = bind_by_name(kBlockActRows, names, views, "test");
  EXPECT_EQ(acts.ln1.dtype(), DType::bf16);
  EXPECT_EQ(acts.ln1.bf16(), &h);
  EXPECT_EQ(acts.ln2.bf16(), &h);
  EXPECT_EQ(acts.fch_gelu.bf16(), &h);
  EXPECT_EQ(acts.fch.bf16(), &h);
  EXPECT_TRUE(acts.fch_swiglu.empty());
  EXPECT_EQ(acts.qkv.f32(), &f);
  EXPECT_EQ(acts.out.f32(), &f);
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == "out") views[i] = TypedView(&h);
  }
  EXPECT_DEATH((void)bind_by_name(kBlockActRows, names, views, "test"), "out is bf16 but its row binds only fp32");
}

TEST(BlockTensorsDeathTest, ATensorWithoutARowAsserts) {
  // A tensor no field binds (a name ModelSpec might grow) is caught.
  std::vector<std::string> names = block_param_names(ModelSpec(small()), 0);
  names.push_back("mlp.c_extra.weight");
  EXPECT_DEATH((void)match_rows(kBlockWeightRows, names, "h.0"), "mlp.c_extra.weight has no row");
}

TEST(BlockTensorsDeathTest, ARowWithoutATensorAsserts) {
  const ModelSpec spec(small());
  const ActivationOptions dropout{.dropout = true};  // masks the runtime keeps no field for
  EXPECT_DEATH((void)match_rows(kBlockActRows, names_of(spec.block_activations(2, 8, dropout)), "acts"),
               "probs_dropout_mask has no row");
  std::vector<std::string> names = names_of(spec.block_activations(2, 8));
  names.pop_back();  // "out"
  EXPECT_DEATH((void)match_rows(kBlockActRows, names, "acts"), "the row out of model/block_tensors.h is not in the list");
}

}  // namespace
}  // namespace tera
