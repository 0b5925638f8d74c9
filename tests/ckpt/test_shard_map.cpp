// ShardMap (ckpt/shard_map.h) over every layout of small tables: GPT-2
// (tied, vocab padding) and Llama (untied head, grouped-query attention with
// key/value heads replicated when tp > kv_heads), tp 1/2/4, pp 1/2, two unit
// alignments. Scatter to every tp rank, then gather back, is the identity
// and covers every element; each scatter matches the element-by-element
// ParamTable::global_index copy the four hand-written loops made.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "ckpt/shard_map.h"
#include "partition/stage_plan.h"

namespace tera {
namespace {

ModelConfig gpt2() {
  return ModelConfig{.layers = 2, .hidden = 32, .heads = 4, .seq_len = 8, .vocab = 100, .ffn_hidden = 0, .vocab_align = 64};
}

ModelConfig llama() {
  ModelConfig c{.layers = 2, .hidden = 32, .heads = 4, .seq_len = 8, .vocab = 100, .ffn_hidden = 48, .vocab_align = 16};
  c.arch = Arch::llama;
  c.mlp = MlpKind::gated;
  c.kv_heads = 2;
  return c;
}

// Distinct, exactly representable values per element.
std::vector<float> counting(const ParamInfo& p, float base) {
  std::vector<float> v(static_cast<size_t>(numel(p.shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = base + static_cast<float>(i);
  return v;
}

// The copy the hand-written loops made (checkpointing's scatter_local, reshard).
std::vector<float> reference_scatter(const ParamTable& t, const ParamEntry& e, const std::vector<float>& global) {
  std::vector<float> local(static_cast<size_t>(e.count), 0.0f);
  for (int64_t i = 0; i < e.count; ++i) {
    const int64_t g = t.global_index(e, i);
    if (g >= 0) local[static_cast<size_t>(i)] = global[static_cast<size_t>(g)];
  }
  return local;
}

struct Layout {
  ModelConfig model;
  int tp, pp;
  int64_t unit_align;
};

class ShardMapLayouts : public ::testing::TestWithParam<Layout> {};

TEST_P(ShardMapLayouts, ScatterThenGatherIsTheIdentity) {
  const Layout& l = GetParam();
  const ModelSpec spec(l.model);
  const int64_t L = l.model.layers;
  const std::vector<int64_t> per(static_cast<size_t>(l.pp), L / l.pp);
  for (int s = 0; s < l.pp; ++s) {
    const StagePlan plan = make_stage_plan(per, l.pp, s);
    std::vector<ParamTable> tables;
    for (int r = 0; r < l.tp; ++r) tables.emplace_back(spec, l.unit_align, l.tp, r, plan);
    const ParamTable& first = tables[0];
    for (size_t k = 0; k < first.entries().size(); ++k) {
      const ParamInfo& info = *first.entries()[k].info;
      const std::vector<float> global = counting(info, 1.0f + 1000.0f * static_cast<float>(k));
      std::vector<float> back(global.size(), -1.0f);
      std::vector<uint8_t> covered(global.size(), 0);
      for (int r = 0; r < l.tp; ++r) {
        const ParamTable& t = tables[static_cast<size_t>(r)];
        const ParamEntry& e = t.entries()[k];
        ASSERT_EQ(e.info->name, info.name);
        const ShardMap map(t);
        std::vector<float> local(static_cast<size_t>(e.count), -7.0f);
        map.scatter(e, global.data(), local.data());
        EXPECT_EQ(local, reference_scatter(t, e, global)) << info.name << " tp rank " << r << " of " << l.tp;
        // Through an unaligned copy, as a slice in a mapped file.
        std::vector<unsigned char> bytes(local.size() * sizeof(float) + 1);
        std::memcpy(bytes.data() + 1, local.data(), local.size() * sizeof(float));
        map.gather(e, bytes.data() + 1, back.data(), covered.data());
      }
      EXPECT_EQ(back, global) << info.name << " stage " << s << " tp " << l.tp;
      EXPECT_EQ(std::count(covered.begin(), covered.end(), 0), 0) << info.name;
    }
  }
}

std::vector<Layout> layouts() {
  std::vector<Layout> out;
  for (const ModelConfig& m : {gpt2(), llama()}) {
    for (int tp : {1, 2, 4}) {
      for (int pp : {1, 2}) {
        for (int64_t align : {int64_t{16}, int64_t{48}}) out.push_back({m, tp, pp, align});
      }
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Tables, ShardMapLayouts, ::testing::ValuesIn(layouts()),
                         [](const ::testing::TestParamInfo<Layout>& i) {
                           const Layout& l = i.param;
                           return std::string(l.model.arch == Arch::llama ? "llama" : "gpt2") + "_tp" +
                                  std::to_string(l.tp) + "_pp" + std::to_string(l.pp) + "_align" +
                                  std::to_string(l.unit_align);
                         });

TEST(ShardMap, PaddingIsZeroAndWholeTensorsAreCopiedInOrder) {
  const ModelSpec spec(gpt2());  // vocab 100 padded to 128 rows
  const ParamTable table(spec);
  const ParamEntry& wte = table.at("wte.weight");
  const ShardMap map(table);
  ASSERT_TRUE(map.whole(wte));
  ASSERT_GT(wte.count, numel(wte.info->shape));
  const std::vector<float> global = counting(*wte.info, 1.0f);
  std::vector<float> local(static_cast<size_t>(wte.count), -7.0f);
  map.scatter(wte, global.data(), local.data());
  EXPECT_TRUE(std::equal(global.begin(), global.end(), local.begin()));
  EXPECT_TRUE(std::all_of(local.begin() + static_cast<std::ptrdiff_t>(global.size()), local.end(),
                          [](float x) { return x == 0.0f; }));
  const ParamTable split(spec, ArenaLayout::kAlignFloats, 2, 1);
  EXPECT_FALSE(ShardMap(split).whole(split.at("wte.weight")));
}

}  // namespace
}  // namespace tera
