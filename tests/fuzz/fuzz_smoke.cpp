// The fuzz smoke of the quick test tier: every fuzz target's entry point
// linked into one program of the ordinary build (no clang, no libFuzzer),
// run on its seed corpus and on deterministic mutations of it (bit flips,
// random bytes, cut, repeated and inserted ranges, truncation). A target
// checks its own invariants and aborts when one fails, so any crash or failed
// check fails the test. The real fuzzing (coverage-guided, ASan + UBSan) is
// the fuzz preset's (tests/fuzz/run.sh, in .ci/run).
//
// Usage: fuzz_smoke TARGET CORPUS_DIR [MUTATIONS_PER_SEED]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_targets.h"

namespace {

using Bytes = std::vector<uint8_t>;

// xorshift64*: the same mutations on every machine and run.
struct Rng {
  uint64_t s;
  uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545F4914F6CDD1DULL;
  }
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(next() % n); }
};

// One to four edits of the kinds that break parsers: a flipped bit, a byte
// set to a boundary value or a structural character, a range cut, repeated
// or inserted, the tail cut off.
Bytes mutate(Bytes b, Rng& rng) {
  static const uint8_t kSpecial[] = {0x00, 0xff, 0x7f, 0x80, '{', '}', '[', ']', '"', ',', ':', '\n', '\\', '0', '9'};
  const int edits = 1 + static_cast<int>(rng.below(4));
  for (int e = 0; e < edits; ++e) {
    const size_t n = b.size();
    switch (rng.below(6)) {
      case 0:
        if (n > 0) b[rng.below(n)] ^= static_cast<uint8_t>(1u << rng.below(8));
        break;
      case 1:
        if (n > 0) b[rng.below(n)] = kSpecial[rng.below(sizeof(kSpecial))];
        break;
      case 2:
        if (n > 0) {
          const size_t at = rng.below(n), len = 1 + rng.below(std::min<size_t>(n - at, 64));
          b.erase(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + len));
        }
        break;
      case 3:
        if (n > 0) {
          const size_t at = rng.below(n), len = 1 + rng.below(std::min<size_t>(n - at, 64));
          const Bytes piece(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + len));
          b.insert(b.begin() + static_cast<std::ptrdiff_t>(rng.below(n + 1)), piece.begin(), piece.end());
        }
        break;
      case 4:
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(rng.below(n + 1)), kSpecial[rng.below(sizeof(kSpecial))]);
        break;
      default:
        b.resize(rng.below(n + 1));
        break;
    }
  }
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: fuzz_smoke TARGET CORPUS_DIR [MUTATIONS_PER_SEED]\ntargets:");
    for (const FuzzTarget& t : kFuzzTargets) std::fprintf(stderr, " %s", t.name);
    std::fprintf(stderr, "\n");
    return 2;
  }
  const FuzzTarget* target = nullptr;
  for (const FuzzTarget& t : kFuzzTargets) {
    if (std::string(t.name) == argv[1]) target = &t;
  }
  if (target == nullptr) {
    std::fprintf(stderr, "fuzz_smoke: unknown target '%s' (run without arguments for the list)\n", argv[1]);
    return 2;
  }
  const long per_seed = argc > 3 ? std::strtol(argv[3], nullptr, 10) : 500;
  std::vector<std::filesystem::path> seeds;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(argv[2], ec)) {
    if (e.is_regular_file()) seeds.push_back(e.path());
  }
  if (ec || seeds.empty()) {
    std::fprintf(stderr, "fuzz_smoke: no seed files in %s\n", argv[2]);
    return 2;
  }
  std::sort(seeds.begin(), seeds.end());
  Rng rng{0x9E3779B97F4A7C15ULL};
  long runs = 0;
  for (const auto& path : seeds) {
    std::ifstream in(path, std::ios::binary);
    const Bytes seed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    target->one_input(seed.data(), seed.size());
    ++runs;
    for (long i = 0; i < per_seed; ++i) {
      const Bytes m = mutate(seed, rng);
      target->one_input(m.data(), m.size());
      ++runs;
    }
  }
  std::printf("fuzz_smoke %s: %ld inputs from %zu seeds, every check held\n", target->name, runs, seeds.size());
  return 0;
}
