// `tera eval`'s loop: the summed per-token loss of a one-process model over
// consecutive windows of a dataset (window w: tokens [w*T, w*T + T + 1),
// inputs its first T, targets its last T; windows never wrap around), in
// micro-batches of B windows, the last one possibly partial.
#pragma once

#include <cstdint>
#include <functional>

#include "data/dataset.h"
#include "model/gpt.h"

namespace tera {

// Whole windows of T + 1 tokens in `data`.
int64_t eval_windows(const TokenDataset& data, int64_t T);

// After each micro-batch but the last: windows done, the loss sum so far.
using EvalProgressFn = std::function<void(int64_t done, double loss_sum)>;

// Sum over windows [0, count) of the per-token losses (the mean loss is
// the sum / (count * T)); count <= eval_windows(data, T). The model's
// micro-batch is B.
double eval_loss_sum(Gpt& model, const TokenDataset& data, int64_t T, int64_t B, int64_t count,
                     const EvalProgressFn& progress);

}  // namespace tera
