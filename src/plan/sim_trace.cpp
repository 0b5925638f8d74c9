// Simulated spans -> core/trace.h Trace per stage rank -> one JSON file.
#include "plan/sim_trace.h"

#include <fmt/format.h>

#include "core/file_util.h"
#include "core/trace.h"

namespace tera {

std::string sim_span_name(const SimSpan& s) {
  switch (s.kind) {
    case InstrKind::forward: return fmt::format("F{}.{}", s.mb, s.chunk);
    case InstrKind::backward: return fmt::format("B{}.{}", s.mb, s.chunk);
    case InstrKind::weight_grad: return fmt::format("W{}.{}", s.mb, s.chunk);
    case InstrKind::send_act: return fmt::format("sA{}.{}>{}", s.mb, s.chunk, s.peer);
    case InstrKind::send_grad: return fmt::format("sG{}.{}>{}", s.mb, s.chunk, s.peer);
    case InstrKind::recv_act: return fmt::format("rA{}.{}<{}", s.mb, s.chunk, s.peer);
    case InstrKind::recv_grad: return fmt::format("rG{}.{}<{}", s.mb, s.chunk, s.peer);
    case InstrKind::reduce_grads: return "reduce_grads";
    case InstrKind::optimizer_step: return "optimizer_step";
  }
  return "?";
}

const char* sim_span_category(const SimSpan& s) {
  switch (s.kind) {
    case InstrKind::send_act:
    case InstrKind::send_grad: return "p2p";
    case InstrKind::recv_act:
    case InstrKind::recv_grad: return "bubble";
    case InstrKind::reduce_grads: return "comm";
    default: return "compute";
  }
}

std::string sim_trace_json(const std::vector<SimSpan>& spans, const ParallelLayout& l) {
  // rank = (pp_rank * dp + dp_rank) * tp + tp_rank with dp_rank = tp_rank = 0.
  auto rank_of = [&](int stage) { return stage * l.dp * l.tp; };
  std::vector<Trace> tracks;
  for (int s = 0; s < l.pp; ++s) tracks.emplace_back(rank_of(s));
  for (const SimSpan& sp : spans) {
    const bool per_mb = sp.kind != InstrKind::reduce_grads && sp.kind != InstrKind::optimizer_step;
    tracks[static_cast<size_t>(sp.stage)].span(sim_span_name(sp), sim_span_category(sp), sp.t0, sp.t1,
                                               per_mb ? sp.mb : -1, per_mb ? sp.chunk : -1);
  }
  std::vector<std::string> parts;  // JSON objects, joined by ",\n"
  for (int s = 0; s < l.pp; ++s) {
    const int r = rank_of(s);
    parts.push_back(fmt::format(R"J({{"name":"thread_name","ph":"M","pid":0,"tid":{},"args":{{"name":"simulated stage {} (rank {}{}{})"}}}})J",
                                r, s, r, l.tp > 1 ? fmt::format("; tp ranks {}..{} identical", r, r + l.tp - 1) : "",
                                l.dp > 1 ? fmt::format("; {} replicas identical", l.dp) : ""));
  }
  for (const Trace& t : tracks) {
    if (!t.empty()) parts.push_back(t.events_json());
  }
  std::string body = "{\"traceEvents\":[\n";
  for (size_t i = 0; i < parts.size(); ++i) body += (i ? ",\n" : "") + parts[i];
  body += "\n],\"displayTimeUnit\":\"ms\"}\n";
  return body;
}

Status write_sim_trace(const std::string& path, const std::vector<SimSpan>& spans, const ParallelLayout& l) {
  const std::string body = sim_trace_json(spans, l);
  auto f = AtomicFile::create(path);
  if (!f) return f.status();
  TERA_RETURN_IF_ERROR(f->write(body.data(), body.size()));
  return f->commit();
}

}  // namespace tera
