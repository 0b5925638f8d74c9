// Gathering every rank's trace events to the first rank.
#include "parallel/trace.h"

#include <fmt/format.h>

#include "core/file_util.h"

namespace tera {

Status write_chrome_trace(const std::string& path, Communicator& world, const Trace& local,
                          const ParallelLayout& layout) {
  const std::string mine = local.events_json();
  const int p = world.size(), r = world.rank();
  std::vector<int64_t> sizes(static_cast<size_t>(p));
  int64_t n = static_cast<int64_t>(mine.size());
  world.all_gather(&n, sizes.data(), 1, CommType::i64);
  constexpr int kTag = 77;
  if (r != 0) {
    if (n > 0) world.send(mine.data(), n, 0, kTag);
    return ok_status();
  }
  // Track names first (metadata events), then the spans.
  std::string body = "{\"traceEvents\":[\n";
  for (int q = 0; q < p; ++q) {
    const ParallelLayout::Coord c = layout.coord(q);
    body += fmt::format(R"J({{"name":"thread_name","ph":"M","pid":0,"tid":{},"args":{{"name":"rank {} (pp {}, dp {}, tp {})"}}}},)J"
                        "\n",
                        q, q, c.pp, c.dp, c.tp);
  }
  body += fmt::format(R"J({{"name":"process_name","ph":"M","pid":0,"args":{{"name":"tera train ({})"}}}})J",
                      layout.to_string());
  if (!mine.empty()) body += ",\n" + mine;
  for (int q = 1; q < p; ++q) {
    const int64_t m = sizes[static_cast<size_t>(q)];
    if (m == 0) continue;
    std::string buf(static_cast<size_t>(m), '\0');
    world.recv(buf.data(), m, q, kTag);
    if (body.back() != '\n') body += ",\n";
    body += buf;
  }
  body += "\n],\"displayTimeUnit\":\"ms\"}\n";
  auto f = AtomicFile::create(path);
  if (!f) return f.status();
  TERA_RETURN_IF_ERROR(f->write(body.data(), body.size()));
  return f->commit();
}

}  // namespace tera
