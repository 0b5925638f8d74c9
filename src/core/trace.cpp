// Trace events as Chrome trace JSON.
#include "core/trace.h"

#include <fmt/format.h>

namespace tera {

void Trace::span(const std::string& name, const std::string& category, double t0, double t1, int mb, int chunk) {
  events_.push_back({name, category, t0, t1, mb, chunk});
}

std::string Trace::events_json() const {
  std::string out;
  for (const auto& e : events_) {
    if (!out.empty()) out += ",\n";
    out += fmt::format(R"({{"name":"{}","cat":"{}","ph":"X","pid":0,"tid":{},"ts":{:.3f},"dur":{:.3f})", e.name,
                       e.category, rank_, e.t0 * 1e6, (e.t1 - e.t0) * 1e6);
    if (e.mb >= 0) out += fmt::format(R"(,"args":{{"mb":{},"chunk":{}}})", e.mb, e.chunk);
    out += "}";
  }
  return out;
}

}  // namespace tera
