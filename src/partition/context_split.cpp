// The load-balanced causal split; see context_split.h.
#include "partition/context_split.h"

#include <algorithm>

#include "core/check.h"

namespace tera {

std::string ContextSplit::check(int64_t seq_len, int cp) {
  if (cp < 1) return "cp must be >= 1";
  if (divides(seq_len, cp)) return "";
  const int64_t d = 2 * int64_t{cp};
  return "context parallelism cuts each sequence into 2 x cp = " + std::to_string(d) +
         " equal chunks, so the sequence length must be a multiple of " + std::to_string(d) + " (it is " +
         std::to_string(seq_len) + "; e.g. " + std::to_string(std::max(d, seq_len / d * d)) + ")";
}

std::vector<ContextSplit::Run> ContextSplit::runs() const {
  TERA_ASSERT(cp >= 1 && rank >= 0 && rank < cp && divides(seq_len, cp), check(seq_len, cp));
  if (cp == 1) return {Run{0, 0, seq_len}};
  const int64_t tc = seq_len / (2 * int64_t{cp});
  return {Run{0, rank * tc, tc}, Run{tc, (2 * int64_t{cp} - 1 - rank) * tc, tc}};
}

int64_t ContextSplit::position(int64_t i) const {
  for (const Run& r : runs()) {
    if (i >= r.local_begin && i < r.local_begin + r.length) return r.position + (i - r.local_begin);
  }
  TERA_ASSERT(false, "local token " + std::to_string(i) + " outside the rank's " + std::to_string(local()));
  return -1;
}

std::vector<int32_t> ContextSplit::positions() const {
  std::vector<int32_t> p(static_cast<size_t>(local()));
  for (const Run& r : runs()) {
    for (int64_t i = 0; i < r.length; ++i) p[static_cast<size_t>(r.local_begin + i)] = static_cast<int32_t>(r.position + i);
  }
  return p;
}

void ContextSplit::take(const int32_t* full, int32_t* local_out, int64_t B) const {
  const std::vector<Run> rs = runs();
  for (int64_t b = 0; b < B; ++b) {
    for (const Run& r : rs) {
      std::copy_n(full + b * seq_len + r.position, r.length, local_out + b * local() + r.local_begin);
    }
  }
}

}  // namespace tera
