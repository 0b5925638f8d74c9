// Recompute names; see recompute.h.
#include "core/recompute.h"

namespace tera {

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}

Expected<Recompute> parse_recompute(const std::string& s) {
  if (s == "none") return Recompute::none;
  if (s == "selective") return Recompute::selective;
  if (s == "full") return Recompute::full;
  return Status::error("unknown recompute '" + s + "'; choose none, selective or full");
}

}  // namespace tera
