// Layout coordinates, group membership and validation.
#include "comm/layout.h"

#include <fmt/format.h>

namespace tera {

std::vector<int> Layout::tp_group(int rank) const {
  Coord c = coord(rank);
  std::vector<int> g;
  for (int t = 0; t < tp; ++t) g.push_back(rank_of({t, c.pp, c.dp}));
  return g;
}

std::vector<int> Layout::dp_group(int rank) const {
  Coord c = coord(rank);
  std::vector<int> g;
  for (int d = 0; d < dp; ++d) g.push_back(rank_of({c.tp, c.pp, d}));
  return g;
}

std::vector<int> Layout::pp_group(int rank) const {
  Coord c = coord(rank);
  std::vector<int> g;
  for (int p = 0; p < pp; ++p) g.push_back(rank_of({c.tp, p, c.dp}));
  return g;
}

std::vector<int> Layout::embedding_group(int rank) const {
  Coord c = coord(rank);
  if (pp == 1 || (c.pp != 0 && c.pp != pp - 1)) return {};
  return {rank_of({c.tp, 0, c.dp}), rank_of({c.tp, pp - 1, c.dp})};
}

std::string Layout::to_string() const { return fmt::format("tp={} pp={} dp={}", tp, pp, dp); }

Expected<Layout> make_layout(int tp, int pp, int dp, int world) {
  if (tp < 1) return Status::error(fmt::format("parallel.tp = {} must be >= 1", tp));
  if (pp < 1) return Status::error(fmt::format("parallel.pp = {} must be >= 1", pp));
  if (dp < 0) return Status::error(fmt::format("parallel.dp = {} must be >= 1 (or left out to derive it)", dp));
  if (dp == 0) {
    if (world % (tp * pp) != 0) {
      return Status::error(fmt::format(
          "world size {} is not divisible by parallel.tp ({}) * parallel.pp ({}) = {}, so parallel.dp cannot be "
          "derived; launch a multiple of {} ranks or change tp/pp",
          world, tp, pp, tp * pp, tp * pp));
    }
    dp = world / (tp * pp);
  }
  if (tp * pp * dp != world) {
    return Status::error(fmt::format(
        "parallel.tp ({}) * parallel.pp ({}) * parallel.dp ({}) = {} != world size {}; launch {} ranks or change the "
        "degrees (leave parallel.dp out to derive it)",
        tp, pp, dp, tp * pp * dp, world, tp * pp * dp));
  }
  return Layout{tp, pp, dp};
}

}  // namespace tera
