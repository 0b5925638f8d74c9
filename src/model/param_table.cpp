// Parameter table construction and layout-invariant initialisation.
#include "model/param_table.h"

#include "core/check.h"
#include "core/rng.h"

namespace tera {

ParamTable::ParamTable(const ModelSpec& spec) {
  for (const auto& p : spec.params()) {
    const int64_t count = numel(p.alloc_shape);
    const int64_t offset = layout_.add(p.name, count);
    entries_.push_back(ParamEntry{&p, p.alloc_shape, offset, count});
  }
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

void init_parameters(const ParamTable& table, float* params, uint64_t seed) {
  table.for_each([&](const ParamEntry& e) {
    float* p = params + e.offset;
    const ParamInfo& info = *e.info;
    // Logical elements are the first numel(info.shape) of the row-major local
    // buffer (padding rows, if any, follow them and stay zero).
    const int64_t n = numel(info.shape);
    switch (info.init) {
      case InitKind::zeros:
        for (int64_t i = 0; i < e.count; ++i) p[i] = 0.0f;
        break;
      case InitKind::ones:
        for (int64_t i = 0; i < n; ++i) p[i] = 1.0f;
        break;
      case InitKind::normal: {
        const PhiloxKey key = philox_key(seed, info.name);
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; ++i) p[i] = info.init_std * philox_normal(key, static_cast<uint64_t>(i));
        for (int64_t i = n; i < e.count; ++i) p[i] = 0.0f;
        break;
      }
    }
  });
}

}  // namespace tera
