// Context parallelism's split of each sequence over the cp ranks of a
// context-parallel group (Megatron-Core's load-balanced causal split): a
// sequence of seq_len tokens is cut into 2 cp chunks of Tc = seq_len / (2 cp)
// tokens, and cp rank r holds chunks r and 2cp - 1 - r, in that order, so
// under the causal mask every rank does the same attention work. Everything
// but attention treats the rank's seq_len / cp local tokens as its sequence;
// positions (GPT-2's learned ones, the rotary angle) follow the chunks.
//
// Worked example, seq_len 8, cp 2 (Tc = 2): chunks [0 1] [2 3] [4 5] [6 7];
// rank 0 holds positions 0 1 6 7, rank 1 holds 2 3 4 5.
//
// cp = 1 is the whole sequence in order (one run; any seq_len).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tera {

struct ContextSplit {
  int cp = 1, rank = 0;
  int64_t seq_len = 1;  // the whole sequence

  // Whether seq_len splits into 2 cp equal chunks (always at cp = 1).
  static bool divides(int64_t seq_len, int cp) { return cp == 1 || (cp > 1 && seq_len % (2 * int64_t{cp}) == 0); }
  // "" when it does, else a message naming the divisor the sequence needs.
  static std::string check(int64_t seq_len, int cp);

  int64_t local() const { return seq_len / cp; }  // tokens of each sequence on this rank
  // A run of consecutive positions among the local tokens: local tokens
  // [local_begin, local_begin + length) are at positions [position, position + length).
  struct Run {
    int64_t local_begin = 0, position = 0, length = 0;
  };
  // One run at cp = 1, else the rank's two chunks.
  std::vector<Run> runs() const;
  int64_t position(int64_t i) const;    // the position of local token i
  std::vector<int32_t> positions() const;  // position(i) for every local token
  // This rank's tokens of B sequences: local[B, local()] from full[B, seq_len].
  void take(const int32_t* full, int32_t* local, int64_t B) const;
};

}  // namespace tera
