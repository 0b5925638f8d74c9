// Offline resharding; see reshard.h.
#include "ckpt/reshard.h"

#include "ckpt/safetensors.h"
#include "ckpt/shard_map.h"
#include "partition/parallel_layout_json.h"
#include "partition/layout_check.h"
#include "partition/param_table.h"
#include "partition/stage_plan.h"

namespace tera {

namespace {

// The target's layout with the source's micro-batch (recorded only where it was).
nlohmann::json resharded_layout(const ParallelLayout& target, const nlohmann::json& source) {
  nlohmann::json j = layout_to_json(target);
  j.erase("micro_batch");
  if (source.contains("micro_batch")) j["micro_batch"] = source["micro_batch"];
  j["resharded_from"] = source;
  return j;
}

// One target file: the (stage, tp rank) slices of every tensor the table
// holds (the tied embedding's copy on the last stage left to stage 0), with
// the moments where the source has them.
Expected<CheckpointFile> write_target_file(const CheckpointReader& source, const ParamTable& table, int stage,
                                           const std::string& staging) {
  const bool moments = source.info().optimizer_state;
  const StagePlan& plan = table.plan();
  const bool tied_copy = plan.stages > 1 && plan.has_head() && !plan.has_embedding();
  const ShardMap map(table);
  std::vector<std::vector<float>> store;  // per tensor: [e.count]
  std::vector<const ParamEntry*> entries;
  std::vector<StateKind> kinds;
  std::vector<float> global;
  for (const ParamEntry& e : table.entries()) {
    if (tied_copy && e.info->name == "wte.weight") continue;
    for (StateKind k : kAllStateKinds) {
      if (k != StateKind::param && !moments) continue;
      global.resize(static_cast<size_t>(numel(e.info->shape)));
      TERA_RETURN_IF_ERROR(source.read_global(k, *e.info, global.data()));
      store.emplace_back(static_cast<size_t>(e.count));
      map.scatter(e, global.data(), store.back().data());
      entries.push_back(&e);
      kinds.push_back(k);
    }
  }
  // Pointers taken once `store` stops growing.
  std::vector<StTensorRef> refs;
  for (size_t i = 0; i < store.size(); ++i) {
    refs.push_back({state_tensor_name(kinds[i], entries[i]->info->name), "F32", entries[i]->local_shape,
                    store[i].data(), store[i].size() * sizeof(float)});
  }
  return write_shard_file(staging, shard_file_name(stage, table.tp_rank()), refs, table.tp(), table.tp_rank(),
                          {{"pp_stage", std::to_string(stage)}});
}

}  // namespace

Expected<std::string> reshard_checkpoint(const CheckpointReader& source, const ParallelLayout& target,
                                         const std::string& root) {
  const CheckpointInfo& src = source.info();
  const ModelSpec& spec = source.spec();
  const std::vector<int64_t> per = virtual_stage_layers(target, spec.config().layers);
  TERA_RETURN_IF_ERROR(begin_checkpoint_dir(root, src.step));
  CheckpointInfo info = src;
  info.files.clear();
  info.layout = resharded_layout(target, src.layout);
  for (int s = 0; s < target.pp; ++s) {
    const StagePlan plan = make_stage_plan(per, target.pp, s);
    for (int t = 0; t < target.tp; ++t) {
      const ParamTable table(spec, ArenaLayout::kAlignFloats, target.tp, t, plan);
      auto f = write_target_file(source, table, s, staging_dir(root, src.step));
      if (!f) return f.status();
      info.files.push_back(*f);
    }
  }
  return commit_checkpoint_dir(root, info, /*keep=*/1 << 30);
}

}  // namespace tera
