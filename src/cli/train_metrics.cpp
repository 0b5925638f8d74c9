// --metrics: the JSONL record of a run; see train_metrics.h.
#include "cli/train_metrics.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/file_util.h"

namespace tera::cli {

Status truncate_metrics(const std::string& path, int64_t step) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return ok_status();
  if (is_special_file(follow_symlinks(path))) return ok_status();  // a FIFO or device: appended to as it is
  auto data = read_regular_file(path, "--metrics", uint64_t{1} << 32);
  if (!data) return data.status();
  std::string kept;
  std::string_view text(reinterpret_cast<const char*>(data->data()), data->size());
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer() && j["step"].get<int64_t>() > step) continue;
    if (j.is_discarded()) continue;  // a torn last line of a killed run
    kept.append(line);
    kept.push_back('\n');
  }
  auto f = AtomicFile::create(path);
  if (!f) return f.status();
  TERA_RETURN_IF_ERROR(f->write(kept.data(), kept.size()));
  return f->commit();
}


bool write_metrics_line(const StepStats& s, std::ofstream& metrics) {
  nlohmann::json j = {{"step", s.step},           {"loss", s.loss},         {"lr", s.lr},
                      {"grad_norm", s.grad_norm}, {"ms", s.seconds * 1e3},  {"tokens_per_s", s.tokens_per_s},
                      {"gflops_per_rank", s.gflops}, {"comm_ms", s.comm_seconds * 1e3}, {"comm_bytes", s.comm_bytes},
                      {"bubble", s.bubble}, {"skipped", s.skipped}};
  if (s.val_loss) j["val_loss"] = *s.val_loss;
  metrics << j.dump() << '\n';
  metrics.flush();
  return static_cast<bool>(metrics);
}

}  // namespace tera::cli
