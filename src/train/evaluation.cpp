// The evaluation loop; see evaluation.h.
#include "train/evaluation.h"

#include <algorithm>
#include <vector>

namespace tera {

int64_t eval_windows(const TokenDataset& data, int64_t T) { return (data.num_tokens() - 1) / T; }

double eval_loss_sum(Gpt& model, const TokenDataset& data, int64_t T, int64_t B, int64_t count,
                     const EvalProgressFn& progress) {
  std::vector<int32_t> tokens(static_cast<size_t>(B * T)), targets(tokens.size());  // [B, T] each
  double sum = 0;
  for (int64_t first = 0; first < count; first += B) {
    const int64_t b = std::min(B, count - first);
    fill_sequential_windows(data, T, first, b, tokens.data(), targets.data());
    sum += model.forward_loss(tokens.data(), targets.data(), b, T);
    if (progress && first + b < count) progress(first + b, sum);
  }
  return sum;
}

}  // namespace tera
