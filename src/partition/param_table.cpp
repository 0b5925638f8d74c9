// Parameter table construction (units, alignment) and layout-invariant init.
#include "partition/param_table.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/rng.h"

namespace tera {

ParamTable::ParamTable(const ModelSpec& spec, int64_t unit_align, int tp, int tp_rank, const StagePlan& plan)
    : plan_(plan.chunks.empty() ? whole_model_plan(spec.config().layers) : plan),
      tp_(tp),
      tp_rank_(tp_rank) {
  TERA_ASSERT(unit_align > 0 && unit_align % ArenaLayout::kAlignFloats == 0);
  TERA_ASSERT(tp >= 1 && tp_rank >= 0 && tp_rank < tp);
  kv_replicas_ = static_cast<int>(spec.kv_replicas(tp));
  const int64_t L = spec.config().layers;
  const bool emb = plan_.has_embedding(), head = plan_.has_head();
  // Bucket the tensors this stage holds by unit; units are laid out wte, io,
  // lm_head, blocks. The token embedding sits on the embedding's stage, and on
  // the head's when it is tied to the LM head.
  const bool tied = spec.config().tied();
  std::vector<const ParamInfo*> wte, io_sp, io, lm_head;
  std::vector<std::vector<const ParamInfo*>> blocks(static_cast<size_t>(L));
  for (const auto& p : spec.params()) {
    if (p.layer >= 0 && p.layer < L) {
      if (plan_.has_layer(p.layer)) blocks[static_cast<size_t>(p.layer)].push_back(&p);
    } else if (p.token_embedding) {
      if (emb || (head && tied)) wte.push_back(&p);
    } else if (p.output_embedding) {
      if (head) lm_head.push_back(&p);
    } else if (p.layer < 0 ? emb : head) {  // embeddings: layer -1; final norm: layer L
      (p.sp_partial_grad ? io_sp : io).push_back(&p);
    }
  }
  io_sp.insert(io_sp.end(), io.begin(), io.end());
  int64_t offset = 0;
  auto add_unit = [&](const std::string& name, const std::vector<const ParamInfo*>& members, int64_t layer) {
    if (members.empty()) return -1;
    ParamUnit u{name, offset, offset, static_cast<int>(entries_.size()), 0, offset, layer};
    const int index = static_cast<int>(units_.size());
    for (const ParamInfo* p : members) {
      const Shape local = spec.local_shape(*p, tp_);
      ParamEntry e{p, local, offset, numel(local), index, {}, {}};
      if (p->tp_split == TpSplit::rows && !p->token_embedding && !p->output_embedding) {
        const int64_t rest = numel(p->shape) / p->shape[0];  // elements per row
        int64_t row = 0;
        for (size_t g = 0; g < p->row_groups.size(); ++g) {
          e.group_rows.push_back(spec.group_rows_local(*p, g, tp_));
          e.group_share.push_back(spec.group_share(*p, g, tp_, tp_rank_));
          if (p->kv_row_groups && g > 0 && kv_replicas_ > 1) {  // k, v: one head, replicated
            if (e.replicated_end == 0) e.replicated_begin = row * rest;
            e.replicated_end = (row + e.group_rows.back()) * rest;
          }
          row += e.group_rows.back();
        }
      }
      entries_.push_back(std::move(e));
      offset += round_up(numel(local), ArenaLayout::kAlignFloats);
      if (p->sp_partial_grad) {
        TERA_ASSERT(u.sp_partial_end == entries_.back().offset, "sp_partial_grad tensors must lead their unit");
        u.sp_partial_end = offset;
      }
    }
    u.end_entry = static_cast<int>(entries_.size());
    u.end = u.begin + round_up(offset - u.begin, unit_align);
    offset = u.end;
    units_.push_back(u);
    return index;
  };
  wte_unit_ = add_unit("wte", wte, -1);
  io_unit_ = add_unit("io", io_sp, -1);
  head_unit_ = add_unit("lm_head", lm_head, -1);
  layer_unit_.assign(static_cast<size_t>(L), -1);
  for (int64_t l = 0; l < L; ++l) {
    // Block tensors keep ModelSpec's order, which puts sp_partial_grad ones first.
    layer_unit_[static_cast<size_t>(l)] = add_unit("h." + std::to_string(l), blocks[static_cast<size_t>(l)], l);
  }
  total_ = offset;
}

int ParamTable::unit_of_layer(int64_t layer) const {
  return layer >= 0 && layer < static_cast<int64_t>(layer_unit_.size()) ? layer_unit_[static_cast<size_t>(layer)] : -1;
}

int64_t ParamTable::max_unit_floats() const {
  int64_t m = 0;
  for (const auto& u : units_) m = std::max(m, u.size());
  return m;
}

const ParamEntry* ParamTable::find(std::string_view name) const {
  for (const auto& e : entries_) {
    if (e.info->name == name) return &e;
  }
  return nullptr;
}

const ParamEntry& ParamTable::at(std::string_view name) const {
  const ParamEntry* e = find(name);
  TERA_ASSERT(e != nullptr, "no parameter named " + std::string(name));
  return *e;
}

int64_t ParamTable::global_index(const ParamEntry& e, int64_t i) const {
  const ParamInfo& p = *e.info;
  switch (p.tp_split) {
    case TpSplit::none:
      return i < numel(p.shape) ? i : -1;  // tp = 1 vocab padding rows, if any
    case TpSplit::rows: {
      const int64_t rest = numel(p.shape) / p.shape[0];  // elements per row
      const int64_t r = i / rest, c = i % rest;
      int64_t global_row;
      if (p.token_embedding || p.output_embedding) {
        global_row = tp_rank_ * e.local_shape[0] + r;  // vocab-parallel embedding / head (padding rows past the vocab)
        if (global_row >= p.shape[0]) return -1;
      } else {
        int64_t local_start = 0, global_start = 0;
        global_row = -1;
        for (size_t g = 0; g < p.row_groups.size(); ++g) {
          const int64_t part = e.group_rows[g];
          if (r < local_start + part) {
            global_row = global_start + e.group_share[g] * part + (r - local_start);
            break;
          }
          local_start += part;
          global_start += p.row_groups[g];
        }
      }
      return global_row * rest + c;
    }
    case TpSplit::cols: {
      const int64_t cl = e.local_shape[1], cg = p.shape[1];
      return (i / cl) * cg + tp_rank_ * cl + (i % cl);
    }
  }
  return -1;
}

void init_parameters(const ParamTable& table, uint64_t seed, int64_t begin, int64_t end, float* dst) {
  std::memset(dst, 0, static_cast<size_t>(end - begin) * sizeof(float));
  table.for_each([&](const ParamEntry& e) {
    const ParamInfo& info = *e.info;
    const int64_t lo = std::max(begin, e.offset), hi = std::min(end, e.offset + e.count);
    if (lo >= hi || info.init == InitKind::zeros) return;
    float* out = dst + (lo - begin);
    const int64_t i0 = lo - e.offset, cnt = hi - lo;
    const PhiloxKey key = philox_key(seed, info.name);
    // Each local element takes the value of its global index (padding: 0).
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < cnt; ++i) {
      const int64_t g = table.global_index(e, i0 + i);
      if (g < 0) continue;
      out[i] = info.init == InitKind::ones ? 1.0f : info.init_std * philox_normal(key, static_cast<uint64_t>(g));
    }
  });
}

}  // namespace tera
