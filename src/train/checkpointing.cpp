// Engine checkpoints; see checkpointing.h.
#include "train/checkpointing.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>

#include "ckpt/shard_map.h"
#include "comm/agree.h"

namespace tera {

namespace {

// This rank's shard file in `dir`: every tensor of its table with both
// moments (the tied embedding's copy on the last stage left to stage 0's).
// p, m, v: [table.total_floats()] in the table's layout.
Expected<CheckpointFile> write_rank_file(const Engine& engine, const float* p, const float* m, const float* v,
                                         const std::string& dir) {
  const Groups& g = engine.groups();
  std::vector<StTensorRef> tensors;
  const bool skip_wte = engine.holds_tied_copy();
  engine.table().for_each([&](const ParamEntry& e) {
    if (skip_wte && e.info->name == "wte.weight") return;
    const size_t bytes = static_cast<size_t>(numel(e.local_shape)) * sizeof(float);
    for (StateKind k : kAllStateKinds) {
      const float* base = k == StateKind::param ? p : k == StateKind::exp_avg ? m : v;
      tensors.push_back({state_tensor_name(k, e.info->name), "F32", e.local_shape, base + e.offset, bytes});
    }
  });
  return write_shard_file(dir, shard_file_name(g.coord.pp, g.coord.tp), tensors, g.layout.tp, g.coord.tp,
                          {{"pp_stage", std::to_string(g.coord.pp)}});
}

}  // namespace

Expected<std::string> save_engine_checkpoint(Engine& engine, CheckpointInfo info, const std::string& root, int64_t keep) {
  const Groups& g = engine.groups();
  Communicator& world = *g.world;
  // 1. Each stage's tp shard, whole (gathered over dp under ZeRO).
  const ParamTable& table = engine.table();
  const size_t total = static_cast<size_t>(table.total_floats());
  std::vector<float> p(total), m(total), v(total);
  engine.gather_state(p.data(), m.data(), v.data());
  // A checkpoint is only ever of finite state: a non-finite one would be
  // the "last good" checkpoint a user resumes from.
  int64_t bad = 0;
  for (const std::vector<float>* x : {&p, &m, &v}) {
    const float* d = x->data();
#pragma omp parallel for reduction(+ : bad)
    for (size_t i = 0; i < total; ++i) bad += !std::isfinite(d[i]);
  }
  const auto nonfinite = [&](const std::string& count) {
    return fmt::format("not writing checkpoint step {}: {} parameter or optimizer values are not finite (on some "
                       "rank); the checkpoints already in {} are left as they are",
                       info.step, count, root);
  };
  TERA_RETURN_IF_ERROR(agree(world, bad > 0 ? Status::error(nonfinite(std::to_string(bad))) : ok_status(),
                             nonfinite("some")));
  // 2. Rank 0 makes the staging directory; everyone learns if it failed.
  Status st = world.rank() == 0 ? begin_checkpoint_dir(root, info.step) : ok_status();
  TERA_RETURN_IF_ERROR(agree(world, st, "rank 0 could not create the checkpoint directory (see its message)"));
  const std::string tmp = staging_dir(root, info.step);
  // A checkpoint that fails (a full disk) leaves no staging directory behind.
  const auto abandon = [&] {
    std::error_code ec;
    if (world.rank() == 0) std::filesystem::remove_all(tmp, ec);
  };

  // 3. The first data- and context-parallel rank of every (stage, tp rank)
  //    writes it (every rank of its ZeRO group holds the same parameters).
  const bool writer = g.coord.dp == 0 && g.coord.cp == 0;
  CheckpointFile written;
  if (writer) {
    auto f = write_rank_file(engine, p.data(), m.data(), v.data(), tmp);
    if (f) {
      written = *f;
    } else {
      st = f.status();
    }
  }
  // 4. Rank 0 learns every file's size and CRC (doubles hold both exactly).
  const int n = world.size();
  std::vector<double> files(static_cast<size_t>(4 * n), 0.0);
  double* mine = &files[static_cast<size_t>(4 * world.rank())];
  mine[0] = writer && st ? 1.0 : 0.0;
  mine[1] = static_cast<double>(written.crc32);
  mine[2] = static_cast<double>(written.bytes);
  mine[3] = st ? 0.0 : 1.0;
  world.all_reduce(files.data(), 4 * n, CommType::f64, ReduceOp::sum);
  for (int r = 0; r < n; ++r) {
    if (files[static_cast<size_t>(4 * r + 3)] > 0) {
      abandon();
      if (!st) return st;
      return Status::error(fmt::format("rank {} could not write its checkpoint file (see its message)", r));
    }
  }
  Expected<std::string> dir = std::string();
  if (world.rank() == 0) {
    for (int r = 0; r < n; ++r) {
      if (files[static_cast<size_t>(4 * r)] == 0) continue;
      const ParallelLayout::Coord c = g.layout.coord(r);
      info.files.push_back({shard_file_name(c.pp, c.tp), static_cast<int64_t>(files[static_cast<size_t>(4 * r + 2)]),
                            static_cast<uint32_t>(files[static_cast<size_t>(4 * r + 1)])});
    }
    std::sort(info.files.begin(), info.files.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    dir = commit_checkpoint_dir(root, info, keep);
  }
  // 5. Nobody moves on (or exits) before the checkpoint is in place.
  if (Status committed = agree(world, dir.status(), "rank 0 could not commit the checkpoint (see its message)");
      !committed) {
    abandon();
    return committed;
  }
  return (std::filesystem::path(root) / step_dir_name(info.step)).string();
}

Status load_engine_weights(Engine& engine, const GlobalTensorFn& read) {
  const ParamTable& table = engine.table();
  const ShardMap map(table);
  const size_t total = static_cast<size_t>(table.total_floats());
  std::vector<float> p(total, 0.0f), zeros(total, 0.0f), global;
  Status st = ok_status();
  table.for_each([&](const ParamEntry& e) {
    if (!st) return;
    global.assign(static_cast<size_t>(numel(e.info->shape)), 0.0f);
    st = read(*e.info, global.data());
    if (st) map.scatter(e, global.data(), p.data() + e.offset);
  });
  if (!st) return st;
  engine.load_state(p.data(), zeros.data(), zeros.data());
  return ok_status();
}

Status load_engine_checkpoint(Engine& engine, const CheckpointReader& reader, bool with_optimizer) {
  const ParamTable& table = engine.table();
  const ShardMap map(table);
  const size_t total = static_cast<size_t>(table.total_floats());
  std::vector<float> p(total, 0.0f), m(total, 0.0f), v(total, 0.0f), global;
  const bool moments = with_optimizer && reader.info().optimizer_state;
  Status st = ok_status();
  table.for_each([&](const ParamEntry& e) {
    if (!st) return;
    const auto& ps = reader.spec().params();
    const auto it = std::find_if(ps.begin(), ps.end(), [&](const ParamInfo& q) { return q.name == e.info->name; });
    const ParamInfo* info = it == ps.end() ? nullptr : &*it;
    if (info == nullptr) {
      st = Status::error(reader.dir() + ": the checkpoint's model has no parameter '" + e.info->name + "'");
      return;
    }
    global.resize(static_cast<size_t>(numel(info->shape)));
    for (StateKind k : kAllStateKinds) {
      if (k != StateKind::param && !moments) continue;
      st = reader.read_global(k, *info, global.data());
      if (!st) return;
      float* dst = k == StateKind::param ? p.data() : k == StateKind::exp_avg ? m.data() : v.data();
      map.scatter(e, global.data(), dst + e.offset);
    }
  });
  if (!st) return st;
  engine.load_state(p.data(), m.data(), v.data());
  return ok_status();
}

}  // namespace tera
