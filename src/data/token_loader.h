// The training-sample loader. Each epoch, every segment of the training data
// (one per shard) is cut into windows of seq_len + 1 tokens at stride seq_len,
// starting at a seeded per-(epoch, segment) offset below seq_len; the windows
// of all segments are then visited in a seeded per-epoch permutation. Global
// sample g lies in epoch g / W at permuted position g % W (W = windows per
// epoch), so it depends only on (data, seq_len, seed, g): the global batch of
// step s is samples [s*G, (s+1)*G) whatever the layout, and data-parallel
// rank r of d reads its contiguous slice (dp_slice). The loader keeps no
// cursor; its position is the next global sample index (LoaderState).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/status.h"
#include "data/dataset.h"

namespace tera {

struct SampleRange {
  int64_t first = 0, count = 0;
};

// Data-parallel rank r of d's samples of step `step`: the r-th of d equal,
// contiguous slices of [step*G, (step+1)*G). d must divide G.
SampleRange dp_slice(int64_t step, int64_t global_batch, int64_t dp_rank, int64_t dp_size);

// What a checkpoint stores about the loader: where the run is, and what it
// was reading, so a resumed run can refuse different data.
struct LoaderState {
  int64_t next_sample = 0;  // global index of the next sample to train on (= steps done x G)
  uint64_t seed = 0;
  int64_t seq_len = 0;
  uint64_t data_fingerprint = 0;

  nlohmann::json to_json() const;
  static Expected<LoaderState> from_json(const nlohmann::json& j, const std::string& what);
  bool operator==(const LoaderState&) const = default;
};

// What the trainer draws samples from: one dataset's TokenLoader, or a blend
// of several (blend_loader.h). Stateless: a sample depends only on its global
// index, so the checkpointed position is LoaderState::next_sample.
class SampleLoader {
 public:
  virtual ~SampleLoader() = default;
  // tokens[count, T] and targets[count, T] (inputs shifted by one) for global
  // samples [first, first + count).
  virtual void fill(int64_t first, int64_t count, int32_t* tokens, int32_t* targets) const = 0;
  virtual LoaderState state(int64_t next_sample) const = 0;
  // next_sample of a saved state, after checking it was saved for this data,
  // seed and seq_len; `what` names the checkpoint in errors.
  virtual Expected<int64_t> resume(const LoaderState& s, const std::string& what) const = 0;
};

class TokenLoader final : public SampleLoader {
 public:
  // `what` names the data in errors (e.g. data.train = "corpus/").
  static Expected<std::unique_ptr<TokenLoader>> create(const TokenDataset& data, int64_t seq_len, uint64_t seed,
                                                       const std::string& what);

  int64_t windows_per_epoch() const { return windows_; }

  struct Location {
    int64_t epoch, segment, offset;  // offset: first token of the window within the whole stream
  };
  Location locate(int64_t sample) const;

  void fill(int64_t first, int64_t count, int32_t* tokens, int32_t* targets) const override;
  LoaderState state(int64_t next_sample) const override;
  Expected<int64_t> resume(const LoaderState& s, const std::string& what) const override;

 private:
  TokenLoader(const TokenDataset& d, int64_t T, uint64_t seed) : data_(d), T_(T), seed_(seed) {}
  const TokenDataset& data_;
  int64_t T_;
  uint64_t seed_;
  std::vector<int64_t> seg_start_;   // stream offset of each segment
  std::vector<int64_t> seg_slack_;   // window-start offsets allowed: [0, slack]
  std::vector<int64_t> win_prefix_;  // windows before each segment (size segments + 1)
  int64_t windows_ = 0;
  PhiloxKey order_key_, shift_key_;
};

}  // namespace tera
