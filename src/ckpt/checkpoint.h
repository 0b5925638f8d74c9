// Training checkpoints: layout-independent, checked and atomic.
//
// A checkpoint is the directory <root>/step-<N> (N = completed optimizer
// steps, zero-padded to 8 digits) holding
//   meta.json                  format "tera-checkpoint", version, model config,
//                              tokenizer reference, the layout it was written
//                              with, step, consumed samples, loader / LR / RNG
//                              state, the run config, and every tensor file's
//                              size and CRC-32;
//   pp<SSS>-tp<TTT>.safetensors one file per (pipeline stage, tensor rank):
//                              the tensors that rank group holds, by global
//                              name, as its tensor-parallel slice:
//                                param/<name>       fp32 master weights
//                                exp_avg/<name>     Adam first moment
//                                exp_avg_sq/<name>  Adam second moment
//                              The file's metadata names its tp degree and
//                              rank; ParamTable::global_index maps each slice
//                              element to the global tensor, so any layout
//                              can read any other's files (resharding).
// Protocol (rank 0 drives the directory, writers only write files):
//   begin_checkpoint_dir   <root>/.tmp-step-N created empty;
//   each writer            write_shard_file into it (atomic file, fsynced);
//   commit_checkpoint_dir  meta.json written last in the staging dir, the dir
//                          fsynced and renamed to step-N, <root>/latest
//                          rewritten atomically, checkpoints beyond `keep`
//                          removed oldest first.
// A crash at any point leaves every earlier step-N complete; a step-N is
// valid iff its meta.json parses and every listed file has its size and CRC.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/safetensors.h"
#include "core/status.h"
#include "model/model_spec.h"
#include "partition/param_table.h"

namespace tera {

inline constexpr const char* kCheckpointFormat = "tera-checkpoint";
inline constexpr int kCheckpointVersion = 1;

// Which per-parameter array a tensor holds.
enum class StateKind { param, exp_avg, exp_avg_sq };
inline constexpr StateKind kAllStateKinds[] = {StateKind::param, StateKind::exp_avg, StateKind::exp_avg_sq};
const char* state_kind_prefix(StateKind k);  // "param", "exp_avg", "exp_avg_sq"
std::string state_tensor_name(StateKind k, const std::string& param);  // "exp_avg/h.0.ln_1.weight"

struct CheckpointFile {
  std::string name;  // plain file name inside the checkpoint directory
  int64_t bytes = 0;
  uint32_t crc32 = 0;
};

// meta.json.
struct CheckpointInfo {
  int64_t step = 0;              // completed optimizer steps
  int64_t consumed_samples = 0;  // step * global batch
  ModelConfig model;
  std::string tokenizer = "bytes";
  // The layout that wrote it, as written (partition/parallel_layout_json.h: read
  // checks it with layout_from_json; `ckpt reshard` nests the source's as
  // "resharded_from"; micro_batch only where recorded).
  nlohmann::json layout = nlohmann::json::object();
  nlohmann::json loader = nlohmann::json::object();     // data/token_loader.h LoaderState
  nlohmann::json lr_schedule = nlohmann::json::object();
  nlohmann::json rng = nlohmann::json::object();
  std::string config_toml;                              // the run config it was written with
  bool optimizer_state = true;                          // exp_avg / exp_avg_sq present
  std::vector<CheckpointFile> files;
};

nlohmann::json checkpoint_info_to_json(const CheckpointInfo& info);
// Parses and validates meta.json's content; `what` names the file in errors.
Expected<CheckpointInfo> checkpoint_info_from_json(const nlohmann::json& j, const std::string& what);
// Parses meta.json bytes (the fuzz target's entry point).
Expected<CheckpointInfo> parse_checkpoint_meta(const uint8_t* data, size_t size, const std::string& what);
Expected<CheckpointInfo> read_checkpoint_info(const std::string& dir);

std::string step_dir_name(int64_t step);  // "step-00000012"
std::string shard_file_name(int pp_stage, int tp_rank);  // "pp000-tp001.safetensors"

// Every listed file present with its size and (check_crc) its CRC-32; the
// message names the file and what is wrong.
Status verify_checkpoint(const std::string& dir, const CheckpointInfo& info, bool check_crc = true);

// Directory protocol (see the top of this file); rank 0 only.
std::string staging_dir(const std::string& root, int64_t step);
Status begin_checkpoint_dir(const std::string& root, int64_t step);
// Writes meta.json into the staging dir, renames it to step-N (replacing an
// older step-N), points `latest` at it and keeps the newest `keep`.
// Returns the final directory.
Expected<std::string> commit_checkpoint_dir(const std::string& root, const CheckpointInfo& info, int64_t keep);

// Writes one shard file (atomically, fsynced); returns its entry for meta.json.
// metadata gets "tp" and "tp_rank" (the slices' layout) added.
Expected<CheckpointFile> write_shard_file(const std::string& dir, const std::string& name,
                                          const std::vector<StTensorRef>& tensors, int tp, int tp_rank,
                                          std::map<std::string, std::string> metadata = {});

// step-N directories under root, newest first (names only parsed, not checked).
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& root);

struct FoundCheckpoint {
  std::string dir;
  CheckpointInfo info;
};
// The newest valid checkpoint under root (nullopt: there is none at all);
// every invalid newer one is described in *skipped. An error when checkpoints
// exist but none is valid.
Expected<std::optional<FoundCheckpoint>> find_latest_valid(const std::string& root, std::vector<std::string>* skipped);

// Reads global tensors out of a checkpoint's shard files, whatever layout
// wrote them. Files are memory-mapped; nothing is held per tensor.
class CheckpointReader {
 public:
  // Opens every shard file listed in meta.json (sizes checked; CRCs too if
  // verify_crc) and indexes their tensors.
  static Expected<CheckpointReader> open(const std::string& dir, bool verify_crc);

  const CheckpointInfo& info() const { return info_; }
  const std::string& dir() const { return dir_; }
  const ModelSpec& spec() const { return *spec_; }
  // Fills out[numel(param.shape)] with the global tensor of `param` (a
  // parameter of spec()). Fails, naming the file, when a slice is missing,
  // has the wrong shape or leaves elements uncovered.
  Status read_global(StateKind kind, const ParamInfo& param, float* out) const;
  // Whether every tensor of kind exists for param.
  bool has(StateKind kind, const std::string& param) const;

  // name -> (file index, tensor) for every stored slice, and the files.
  struct Slice {
    size_t file;
    const StTensorRef* tensor;
  };
  const std::multimap<std::string, Slice>& slices() const { return slices_; }
  const std::vector<SafetensorsFile>& files() const { return files_; }

 private:
  CheckpointReader() = default;
  std::string dir_;
  CheckpointInfo info_;
  std::unique_ptr<ModelSpec> spec_;
  std::vector<SafetensorsFile> files_;
  std::vector<int> file_tp_, file_tp_rank_;
  std::map<std::pair<int, int>, std::unique_ptr<ParamTable>> tables_;  // (tp, tp_rank) -> whole-model table
  std::multimap<std::string, Slice> slices_;
};

// Human-readable differences between two model configs ("model.layers: 4 in
// the checkpoint, 8 in the config"), empty if equal.
std::string model_config_diff(const ModelConfig& ckpt, const ModelConfig& run);

}  // namespace tera
