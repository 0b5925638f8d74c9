// `tera ckpt`: inspect, export, import and reshard checkpoints offline. Every
// SOURCE is a model source (ckpt/model_source.h): a training checkpoint
// ckpt.dir/step-N, a ckpt.dir (its latest valid checkpoint), a tera-model
// directory (out.dir/final) or a .safetensors file.
//   inspect SOURCE                        metadata, files with checksum status,
//                                         tensors; a ckpt.dir lists its checkpoints
//   export SOURCE --out FILE.safetensors  Hugging Face GPT-2 or Llama names (by
//                                         model.arch) + config.json
//                                         (+ vocab.json, merges.txt for a BPE tokenizer);
//                                         above --max-shard-size (5GB) as shards
//                                         FILE-0000i-of-0000N.safetensors + FILE.safetensors.index.json;
//                                         --dtype bf16: rounded to nearest even
//   import SOURCE --out DIR               a tera-model directory (weights and the
//                                         tokenizer) for ckpt.init, generate, eval
//   reshard SOURCE --layout tp=..,pp=.. --out ROOT
//                                         a training checkpoint rewritten as another
//                                         layout's shard files under ROOT/step-N
// Outputs are checked before any work (cli/output_paths.h): an existing one
// is replaced only with --force (atomically), and never one of the inputs.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_gpt2.h"
#include "ckpt/hf_llama.h"
#include "ckpt/model_checkpoint.h"
#include "ckpt/model_source.h"
#include "ckpt/reshard.h"
#include "ckpt/safetensors_index.h"
#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/output_paths.h"
#include "cli/tokenizer_flags.h"
#include "core/file_util.h"
#include "core/format.h"
#include "data/tokenizer_file.h"
#include "model/stage_plan.h"
#include "core/parallel_layout.h"
#include "model/layout_check.h"

namespace tera::cli {

namespace {

namespace fs = std::filesystem;

struct CkptArgs {
  std::string dir;     // SOURCE of inspect, export, reshard
  std::string file;    // SOURCE of import
  std::string out;
  std::string format = "safetensors";
  std::string layout;  // reshard target
  int64_t heads = 0;   // a safetensors SOURCE without config.json
  std::string tokenizer;  // import: "bytes", a tokenizer file or directory (default: tokenizer.json or vocab.json beside the file)
  TokenizerFlags tokenizer_flags;  // import: --pattern, --special (a tiktoken --tokenizer)
  bool force = false;     // replace an existing --out
  std::string dtype = "fp32";            // export: fp32 or bf16
  std::string max_shard_size = "5GB";    // export: shards above this (Hugging Face's default)
};

int bad_input(const std::string& msg) {
  print_error(msg);
  return kExitBadInput;
}

// The tokenizer a source records.
Expected<BpeTokenizer> source_tokenizer(const ModelSourceReader& src) {
  return tokenizer_from_reference(src.tokenizer(), src.tokenizer_base(), src.tokenizer_where());
}

// Resolves and opens SOURCE; a safetensors file's heads from --heads when no config.json is beside it.
Expected<ModelSourceReader> open_source(const std::string& path, int64_t heads) {
  auto source = resolve_model_source(path);
  if (!source) return source.status();
  ModelSourceOptions opt;
  opt.heads = heads;
  return ModelSourceReader::open(*source, opt);
}

// The files export writes beside --out (GPT-2's names, fixed by Hugging Face).
struct ExportPaths {
  std::string config, vocab, merges, tokenizer;
};

ExportPaths export_paths(const std::string& out) {
  const fs::path parent = fs::path(out).has_parent_path() ? fs::path(out).parent_path() : fs::path(".");
  return {(parent / "config.json").string(), (parent / "vocab.json").string(), (parent / "merges.txt").string(),
          (parent / "tokenizer.json").string()};
}

// The weight files an earlier export to `out` may have left: out itself, its
// index and its shards (STEM-NNNNN-of-NNNNN.safetensors).
std::vector<std::string> earlier_export_weights(const std::string& out) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const std::string& p : {out, out + ".index.json"}) {
    if (fs::exists(p, ec)) found.push_back(p);
  }
  const fs::path dir = fs::path(out).has_parent_path() ? fs::path(out).parent_path() : fs::path(".");
  std::string stem = fs::path(out).filename().string();
  if (stem.size() > 12 && stem.compare(stem.size() - 12, 12, ".safetensors") == 0) stem.resize(stem.size() - 12);
  const std::string prefix = stem + "-";
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    // STEM-00001-of-00002.safetensors: the prefix, 5 digits, "-of-", 5 digits, the suffix.
    if (name.size() != prefix.size() + 26 || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    bool shard = rest.compare(5, 4, "-of-") == 0 && rest.compare(14, 12, ".safetensors") == 0;
    for (size_t i : {0, 1, 2, 3, 4, 9, 10, 11, 12, 13}) shard = shard && std::isdigit(static_cast<unsigned char>(rest[i]));
    if (shard) found.push_back(e.path().string());
  }
  return found;
}

// What reading a source reads: the source itself, the config.json and
// GPT-2 tokenizer files beside a safetensors file, a tokenizer it names.
std::vector<InputPath> source_inputs(const ModelSourceReader& src, const std::string& given) {
  std::vector<InputPath> in = {{given, "the source"}, {src.source().path, "the source"}};
  if (src.source().kind == ModelSourceKind::safetensors) {
    const ExportPaths beside = export_paths(src.source().path);
    for (const std::string& p : {beside.config, beside.vocab, beside.merges, beside.tokenizer}) in.push_back({p, "the source's"});
  }
  in.push_back({tokenizer_reference_path(src.tokenizer(), src.tokenizer_base()), "the source's tokenizer"});
  return in;
}

// A weights-only source: a tera-model directory or a safetensors file.
int inspect_weights(const ModelSource& source, int64_t heads) {
  ModelSourceOptions opt;
  opt.heads = heads;
  auto src = ModelSourceReader::open(source, opt);
  if (!src) {
    print_error(src.error());
    return kExitBadInput;
  }
  const ModelConfig& model = src->model();
  const std::string what = source.kind == ModelSourceKind::model_dir
                               ? fmt::format("tera-model (weights only), step {}", src->step())
                               : fmt::format("safetensors ({} names, weights only)",
                                             src->file()->metadata().count("format") &&
                                                     src->file()->metadata().at("format") == "tera"
                                                 ? "tera"
                                             : is_hf_llama_file(*src->file()) ? "Hugging Face Llama"
                                                                              : "Hugging Face GPT-2") +
                                 (src->file()->shard_paths().empty()
                                      ? std::string()
                                      : fmt::format(", {} shards", src->file()->shard_paths().size()));
  fmt::print("{}: {}, {}, {} layers, hidden {}, {} heads{}, seq {}, vocab {}\n", source.given, what,
             arch_name(model.arch), model.layers, model.hidden, model.heads,
             model.kv() != model.heads ? fmt::format(" ({} kv)", model.kv()) : "", model.seq_len, model.vocab);
  auto weights = src->read_all();
  if (!weights) {
    fmt::print("  INVALID: {}\n", weights.error());
    return kExitFailure;
  }
  int64_t n = 0;
  for (const auto& t : *weights) n += static_cast<int64_t>(t.data.size());
  fmt::print("  {} tensors, {} parameters, {}\n", weights->size(), human_count(static_cast<double>(n)),
             source.kind == ModelSourceKind::model_dir ? "checksum OK" : fmt::format("crc32 {:08x}", src->file()->crc32()));
  return kExitOk;
}

int inspect_one(const std::string& dir) {
  auto info = read_checkpoint_info(dir);
  if (!info) {
    print_error(info.error());
    return kExitBadInput;
  }
  const CheckpointInfo& c = *info;
  const ModelConfig& m = c.model;
  fmt::print("{}: {} v{}\n", dir, kCheckpointFormat, kCheckpointVersion);
  fmt::print("  step {} ({} samples consumed)\n", c.step, c.consumed_samples);
  const ModelConfig::RopeScaling& rs = m.rope_scaling;
  fmt::print("  model: {}, {} layers, hidden {}, {} heads{}, seq {}, vocab {}, ffn {}{}{}\n", arch_name(m.arch), m.layers,
             m.hidden, m.heads,
             m.kv() != m.heads ? fmt::format(" ({} kv)", m.kv()) : "", m.seq_len, m.vocab, m.ffn(),
             m.mlp == MlpKind::gated ? ", gated MLP" : "",
             m.arch == Arch::llama && rs.llama3
                 ? fmt::format(", rope_scaling llama3 (factor {}, low {}, high {}, original {})", rs.factor,
                               rs.low_freq_factor, rs.high_freq_factor, rs.original_max_positions)
                 : "");
  fmt::print("  written by layout: {}\n", c.layout.dump());
  fmt::print("  tokenizer: {}\n", c.tokenizer == "bytes" ? "bytes" : fmt::format("BPE ({} bytes of tokenizer JSON)", c.tokenizer.size()));
  fmt::print("  lr schedule: {}\n  loader: {}\n  rng: {}\n", c.lr_schedule.dump(), c.loader.dump(), c.rng.dump());
  fmt::print("  optimizer state: {}\n", c.optimizer_state ? "fp32 master weights + Adam exp_avg, exp_avg_sq" : "none");
  bool ok = true;
  int64_t total = 0;
  for (const auto& f : c.files) {
    CheckpointInfo one = c;
    one.files = {f};
    const Status st = verify_checkpoint(dir, one, /*check_crc=*/true);
    ok = ok && static_cast<bool>(st);
    total += f.bytes;
    fmt::print("  {:<28} {:>10}  crc32 {:08x}  {}\n", f.name, human_bytes(f.bytes), f.crc32, st ? "OK" : st.message());
  }
  if (!ok) {
    fmt::print("  INVALID: --resume auto would skip this checkpoint\n");
    return kExitFailure;
  }
  auto reader = CheckpointReader::open(dir, /*verify_crc=*/false);
  if (!reader) {
    fmt::print("  INVALID: {}\n", reader.error());
    return kExitFailure;
  }
  fmt::print("  {} files, {}; tensors:\n", c.files.size(), human_bytes(total));
  int64_t params = 0;
  std::vector<float> scratch;
  for (const ParamInfo& p : reader->spec().params()) {
    std::string where;
    auto range = reader->slices().equal_range(state_tensor_name(StateKind::param, p.name));
    int slices = 0;
    for (auto it = range.first; it != range.second; ++it) ++slices;
    scratch.resize(static_cast<size_t>(numel(p.shape)));
    const Status st = reader->read_global(StateKind::param, p, scratch.data());
    params += numel(p.shape);
    fmt::print("    {:<28} {:<14} {} slice{}{}\n", p.name, shape_str(p.shape), slices, slices == 1 ? "" : "s",
               st ? "" : "  " + st.message());
    ok = ok && static_cast<bool>(st);
  }
  fmt::print("  {} parameters{}\n", human_count(static_cast<double>(params)), ok ? "" : "; INVALID");
  return ok ? kExitOk : kExitFailure;
}

int run_inspect(const CkptArgs& a) {
  std::error_code ec;
  if (fs::is_directory(a.dir, ec) && !fs::exists(fs::path(a.dir) / "meta.json", ec)) {
    const auto all = list_checkpoints(a.dir);
    if (all.empty()) {
      print_error(a.dir + ": neither a checkpoint (no meta.json) nor a ckpt.dir holding step-N checkpoints");
      return kExitBadInput;
    }
    auto latest = read_file((fs::path(a.dir) / "latest").string());
    fmt::print("{}: {} checkpoints{}\n", a.dir, all.size(),
               latest ? ", latest -> " + std::string(latest->begin(), latest->end() - (latest->empty() ? 0 : 1)) : "");
    for (const auto& [step, name] : all) {
      const std::string d = (fs::path(a.dir) / name).string();
      auto info = read_checkpoint_info(d);
      const Status st = info ? verify_checkpoint(d, *info) : info.status();
      fmt::print("  {}  {}\n", name, st ? "valid" : "INVALID: " + st.message());
    }
    return kExitOk;
  }
  auto source = resolve_model_source(a.dir);
  if (!source) {
    print_error(source.error());
    return kExitBadInput;
  }
  if (source->weights_only()) return inspect_weights(*source, a.heads);
  return inspect_one(source->path);
}

int run_export(const CkptArgs& a) {
  if (a.format != "safetensors") {
    print_error("--format " + a.format + ": only 'safetensors' (Hugging Face names) is supported");
    return kExitBadInput;
  }
  // Outputs first: the weights file and the files beside it; none inside the
  // checkpoint it reads (a later checkpoint of the run replaces that directory).
  if (a.dtype != "fp32" && a.dtype != "bf16") {
    return bad_input("--dtype " + a.dtype + ": write 'fp32' (the master weights exactly) or 'bf16' (rounded to nearest "
                     "even, half the bytes)");
  }
  auto max_shard = parse_shard_size(a.max_shard_size, "--max-shard-size");
  if (!max_shard) return bad_input(max_shard.error());
  if (is_safetensors_index_path(a.out)) {
    return bad_input("--out " + a.out + ": name the weights file (e.g. model.safetensors); when the model is larger "
                     "than --max-shard-size its shards and model.safetensors.index.json are written beside that name");
  }
  const ExportPaths side = export_paths(a.out);
  const CreatedDirsGuard created(parent_dir(a.out));
  if (Status s = check_output_file(a.out, "--out", a.force, /*create_parent=*/true); !s) return bad_input(s.message());
  const std::vector<std::string> earlier = earlier_export_weights(a.out);
  for (const std::string& p : earlier) {
    if (Status s = refuse_existing(p, "--out " + a.out + " writes its shards beside it", a.force); !s) {
      return bad_input(s.message());
    }
  }
  for (const std::string& p : {side.config, side.vocab, side.merges, side.tokenizer}) {
    if (Status s = refuse_existing(p, "--out " + a.out + " writes beside it", a.force); !s) return bad_input(s.message());
  }
  if (is_within(a.out, a.dir) || same_file(a.out, a.dir)) {
    return bad_input("--out " + a.out + ": is inside the checkpoint it exports (" + a.dir + "); write it elsewhere");
  }
  auto src = open_source(a.dir, a.heads);
  if (!src) return bad_input(src.error());
  if (is_within(a.out, src->source().path)) {
    return bad_input("--out " + a.out + ": is inside the checkpoint it exports (" + src->source().path +
                     "); write it elsewhere");
  }
  const std::string beside_what = "--out " + a.out + " writes beside it";
  if (Status s = refuse_overlapping_paths({{a.out, "--out", {}}, {side.config, beside_what, {}},
                                           {side.vocab, beside_what, {}}, {side.merges, beside_what, {}},
                                           {side.tokenizer, beside_what, {}}},
                                          source_inputs(*src, a.dir));
      !s) {
    return bad_input(s.message());
  }
  auto tok = source_tokenizer(*src);
  if (!tok) return bad_input(tok.error());
  const ModelConfig model = src->model();
  auto weights = src->read_all();
  if (!weights) return bad_input(weights.error());
  const bool llama = model.arch == Arch::llama;
  HfExportOptions opt;
  opt.eot = tok->eot();
  opt.bf16 = a.dtype == "bf16";
  opt.max_shard_bytes = *max_shard;
  auto written = llama ? export_hf_llama(*weights, model, a.out, opt) : export_hf_gpt2(*weights, model, a.out, opt);
  if (!written) {
    print_error(written.error());
    return kExitFailure;
  }
  // An earlier export's weight files that this one did not rewrite (--force):
  // a reader of the directory must not find two models in it.
  std::string stale_note;
  for (const std::string& p : earlier) {
    if (std::find(written->begin(), written->end(), p) != written->end()) continue;
    std::error_code ec;
    if (fs::remove(p, ec)) stale_note += "; removed the earlier export's " + fs::path(p).filename().string();
  }
  std::string tok_note = "byte-level model: no tokenizer files";
  if (!tok->is_bytes()) {
    // tokenizer.json always; GPT-2's pair too where it can say the same
    // (GPT-2's pattern and rules, <|endoftext|> its only special token).
    if (Status s = save_tokenizer(*tok, side.tokenizer); !s) {
      print_error("the weights were written but not the tokenizer: " + s.message());
      return kExitFailure;
    }
    tok_note = fmt::format("tokenizer ({} tokens) as tokenizer.json", tok->vocab_size());
    if (gpt2_files_can_hold(*tok)) {
      if (Status s = save_gpt2_tokenizer(*tok, side.vocab, side.merges); !s) {
        print_error("the weights were written but not the tokenizer: " + s.message());
        return kExitFailure;
      }
      tok_note += " and vocab.json + merges.txt";
    } else {
      for (const std::string& p : {side.vocab, side.merges}) {
        std::error_code ec;
        if (fs::remove(p, ec)) tok_note += "; removed the earlier export's " + fs::path(p).filename().string();
      }
    }
  } else {
    // A byte-level export beside an older BPE export (--force): its tokenizer
    // files would be read back by import as this model's.
    for (const std::string& p : {side.vocab, side.merges, side.tokenizer}) {
      std::error_code ec;
      if (fs::remove(p, ec)) tok_note += "; removed the earlier export's " + fs::path(p).filename().string();
    }
  }
  const std::string where = written->size() == 1
                                ? a.out
                                : fmt::format("{} shards of at most {} tensor bytes, read through {}",
                                              written->size() - 1, *max_shard, written->back());
  fmt::print("exported {} tensors to {} (Hugging Face {} names, {}; config.json beside it; {}{})\n", weights->size(),
             where, llama ? "Llama" : "GPT-2", opt.bf16 ? "bf16" : "fp32", tok_note, stale_note);
  return kExitOk;
}

// import of a training checkpoint, a ckpt.dir or a tera-model directory: its
// weights and tokenizer (or --tokenizer) as a self-contained tera-model directory.
int import_tera_source(const CkptArgs& a, const ModelSource& source) {
  auto src = ModelSourceReader::open(source);
  if (!src) return bad_input(src.error());
  std::vector<InputPath> inputs = source_inputs(*src, a.file);
  inputs.push_back({a.tokenizer == "bytes" ? "" : a.tokenizer, "--tokenizer"});
  if (Status s = refuse_overlapping_paths({{a.out, "--out", {"*"}}}, inputs); !s) return bad_input(s.message());
  auto tok = a.tokenizer.empty() ? source_tokenizer(*src) : open_tokenizer(tokenizer_spec(a.tokenizer_flags, a.tokenizer));
  if (!tok) return bad_input("tokenizer: " + tok.error());
  if (tok->vocab_size() > src->model().vocab) {
    return bad_input(fmt::format("tokenizer: {} tokens, more than the model's vocab {}", tok->vocab_size(),
                                 src->model().vocab));
  }
  auto weights = src->read_all();
  if (!weights) return bad_input(weights.error());
  std::vector<NamedTensor> named;
  for (const GlobalTensor& t : *weights) named.push_back({t.name, t.shape, t.data.data()});
  CheckpointMeta meta;
  meta.model = src->model();
  meta.step = src->step();
  meta.extra = {{"imported_from", source.path}};
  if (src->micro_batch() > 0) meta.extra["micro_batch"] = src->micro_batch();
  meta.tokenizer = tokenizer_reference(*tok);
  if (Status s = save_model_checkpoint(a.out, named, meta); !s) {
    print_error(s.message());
    return kExitFailure;
  }
  fmt::print("imported {} ({}, step {}): {} layers, hidden {}, {} heads, seq {}, vocab {} -> {}\n", a.file,
             model_source_kind_name(source.kind), src->step(), meta.model.layers, meta.model.hidden,
             meta.model.heads, meta.model.seq_len, meta.model.vocab, a.out);
  return kExitOk;
}

int run_import(const CkptArgs& a) {
  const CreatedDirsGuard created(parent_dir(a.out));
  if (Status s = check_output_dir_replace(a.out, "--out", a.force); !s) return bad_input(s.message());
  auto source = resolve_model_source(a.file);
  if (!source) return bad_input(source.error());
  if (source->kind != ModelSourceKind::safetensors) return import_tera_source(a, *source);
  {
    const ExportPaths beside = export_paths(a.file);
    const std::vector<InputPath> inputs = {{a.file, "the source"},
                                           {beside.config, "the source's"},
                                           {beside.vocab, "the source's"},
                                           {beside.merges, "the source's"},
                                           {beside.tokenizer, "the source's"},
                                           {a.tokenizer == "bytes" ? "" : a.tokenizer, "--tokenizer"}};
    if (Status s = refuse_overlapping_paths({{a.out, "--out", {"*"}}}, inputs); !s) return bad_input(s.message());
  }
  auto file = SafetensorsFile::open(a.file);
  if (!file) return bad_input(file.error());
  const bool llama = is_hf_llama_file(*file);
  auto model = llama ? infer_hf_llama_config(*file) : infer_hf_gpt2_config(*file, a.heads);
  if (!model) return bad_input(model.error());
  const ModelSpec spec(*model);
  if (Status s = llama ? check_hf_llama_tensors(*file, spec) : check_hf_gpt2_tensors(*file, spec); !s) {
    return bad_input(s.message());
  }
  // The tokenizer: --tokenizer, else GPT-2's vocab.json + merges.txt beside
  // the file (what export writes), else byte-level.
  std::string tok_spec = a.tokenizer;
  const fs::path beside = fs::path(a.file).has_parent_path() ? fs::path(a.file).parent_path() : fs::path(".");
  std::error_code ec;
  if (tok_spec.empty()) {
    tok_spec = fs::exists(beside / "tokenizer.json", ec) || fs::exists(beside / "vocab.json", ec) ||
                       fs::exists(beside / "merges.txt", ec)
                   ? beside.string()
                   : "bytes";
  }
  auto tok = open_tokenizer(tokenizer_spec(a.tokenizer_flags, tok_spec));
  if (!tok) {
    return bad_input("tokenizer: " + tok.error() +
                     (a.tokenizer.empty() ? "; pass --tokenizer FILE|DIR, or --tokenizer bytes to import without one" : ""));
  }
  if (tok->vocab_size() > model->vocab) {
    return bad_input(fmt::format("tokenizer {}: {} tokens, more than the {} rows of {}'s wte.weight", tok_spec,
                                 tok->vocab_size(), model->vocab, a.file));
  }
  std::vector<std::vector<float>> data;
  std::vector<NamedTensor> named;
  data.reserve(spec.params().size());
  for (const ParamInfo& p : spec.params()) {
    data.emplace_back(static_cast<size_t>(numel(p.shape)));
    if (Status s = llama ? read_hf_llama_tensor(*file, *model, p, data.back().data())
                         : read_hf_or_tera_tensor(*file, p, data.back().data());
        !s) {
      print_error(s.message());
      return kExitBadInput;
    }
    named.push_back({p.name, p.shape, data.back().data()});
  }
  CheckpointMeta meta;
  meta.model = *model;
  meta.extra = {{"imported_from", a.file}};
  meta.tokenizer = tokenizer_reference(*tok);  // embedded: the directory is self-contained
  if (Status s = save_model_checkpoint(a.out, named, meta); !s) {
    print_error(s.message());
    return kExitFailure;
  }
  fmt::print("imported {}: {}, {} layers, hidden {}, {} heads{}, seq {}, vocab {}, {} -> {} (use as ckpt.init)\n",
             a.file, arch_name(model->arch), model->layers, model->hidden, model->heads,
             model->kv() != model->heads ? fmt::format(" ({} kv)", model->kv()) : "", model->seq_len, model->vocab,
             tok->is_bytes() ? std::string("byte-level tokens") : fmt::format("BPE tokenizer of {} tokens", tok->vocab_size()),
             a.out);
  return kExitOk;
}

int run_reshard(const CkptArgs& a) {
  // The planner's layout strings; dp and zero are only recorded (the files
  // depend on tp and pp), so dp may be left out.
  const bool has_dp = ("," + a.layout).find(",dp=") != std::string::npos;
  auto layout = parse_layout(has_dp ? a.layout : a.layout + ",dp=1", /*gpus=*/0);
  if (!layout) {
    print_error("--layout: " + layout.error());
    return kExitBadInput;
  }
  auto source = resolve_model_source(a.dir);
  if (!source) return bad_input(source.error());
  if (source->weights_only()) {
    return bad_input(fmt::format("{}: a {} holds weights only (no optimizer or data-loader state), so it has no "
                                 "training checkpoint to reshard; any layout loads it directly as ckpt.init",
                                 a.dir, model_source_kind_name(source->kind)));
  }
  auto reader = CheckpointReader::open(source->path, /*verify_crc=*/true);
  if (!reader) {
    print_error(reader.error());
    return kExitBadInput;
  }
  const CheckpointInfo& src = reader->info();
  const ModelSpec& spec = reader->spec();
  {
    const std::string target = (fs::path(a.out) / step_dir_name(src.step)).string();
    const std::string step = step_dir_name(src.step);
    if (Status s = refuse_overlapping_paths({{a.out, "--out", {step, ".tmp-" + step, ".old-" + step, "latest"}}},
                                            {{source->path, "the checkpoint it reads"}, {a.dir, "the source"}});
        !s) {
      return bad_input(s.message());
    }
    if (Status s = refuse_existing(target, "--out " + a.out + ": the checkpoint", a.force); !s) {
      return bad_input(s.message());
    }
  }
  const CreatedDirsGuard created(a.out);
  if (Status s = probe_output_dir(a.out, "--out"); !s) return bad_input(s.message());
  // The one layout check (model/layout_check.h): the files depend on tp, pp
  // and the layers of each stage; the batch and the world come with the run.
  if (Status s = check_layout(*layout, spec.config(), /*global_batch=*/0, /*world=*/0); !s) {
    return bad_input("--layout " + a.layout + ": " + s.message());
  }
  auto dir = reshard_checkpoint(*reader, *layout, a.out);
  if (!dir) {
    print_error(dir.error());
    return kExitFailure;
  }
  fmt::print("resharded {} (layout {}) -> {} (tp {}, pp {}; {} files); train with ckpt.dir = {} and --resume auto\n",
             source->path, src.layout.dump(), *dir, layout->tp, layout->pp, layout->tp * layout->pp, a.out);
  return kExitOk;
}

}  // namespace

Command add_ckpt_command(CLI::App& parent) {
  auto args = std::make_shared<CkptArgs>();
  auto* sub = parent.add_subcommand("ckpt", "Inspect, export, import and reshard checkpoints");
  sub->require_subcommand(1);
  auto* inspect = sub->add_subcommand("inspect", "Print a checkpoint's metadata, files (checksums verified) and tensors; "
                                                 "or list the checkpoints of a ckpt.dir");
  const std::string source_help =
      "Model source: a training checkpoint (ckpt.dir/step-N), a ckpt.dir (its latest valid checkpoint), a tera-model "
      "directory (out.dir/final), a .safetensors file or a sharded model's model.safetensors.index.json";
  inspect->add_option("source", args->dir, source_help + " (a ckpt.dir: its checkpoints listed)")->required();
  inspect->add_option("--heads", args->heads, "Attention heads of a .safetensors SOURCE without config.json beside it")
      ->check(int_in(1, 1 << 20));
  auto* exp = sub->add_subcommand("export", "Write the weights as safetensors with Hugging Face names (GPT-2 or Llama, "
                                            "by model.arch) and config.json");
  exp->add_option("source", args->dir, source_help)->required();
  exp->add_option("--heads", args->heads, "Attention heads of a .safetensors SOURCE without config.json beside it")
      ->check(int_in(1, 1 << 20));
  exp->add_option("-o,--out", args->out, "Output .safetensors file")->required();
  exp->add_option("--format", args->format, "Output format (safetensors)");
  exp->add_option("--dtype", args->dtype, "Tensor dtype: fp32 (default, exact) or bf16 (rounded to nearest even)");
  exp->add_option("--max-shard-size", args->max_shard_size,
                  "Largest shard (tensor bytes; 5GB = 5*10^9 as Hugging Face, or KiB/MiB/GiB): a larger model is "
                  "written as shards OUT-STEM-0000i-of-0000N.safetensors + OUT.index.json (default 5GB)");
  exp->add_flag("--force", args->force, "Replace an existing --out (and the config.json, vocab.json, merges.txt, "
                                        "index and shards beside it)");
  auto* imp = sub->add_subcommand("import", "Read a GPT-2 or Llama safetensors file (Hugging Face or tera names), or any other "
                                            "model source, into a tera-model directory, for ckpt.init, generate and eval");
  imp->add_option("source", args->file, source_help + " (Hugging Face GPT-2 or Llama, or tera names)")->required();
  imp->add_option("-o,--out", args->out, "Output directory")->required();
  imp->add_option("--heads", args->heads, "Attention heads, when no config.json is beside the file")
      ->check(int_in(1, 1 << 20));
  imp->add_option("--tokenizer", args->tokenizer,
                  "Tokenizer the model was trained with: 'bytes', a tokenizer.json, a tiktoken rank file (with "
                  "--pattern), or a directory with tokenizer.json or GPT-2's vocab.json + merges.txt (default: "
                  "tokenizer.json or vocab.json + merges.txt beside the file, else bytes)");
  add_tokenizer_flags(imp, args->tokenizer_flags);
  imp->add_flag("--force", args->force, "Replace an existing --out (atomically: the old one stays until the new one is complete)");
  auto* re = sub->add_subcommand("reshard", "Rewrite a checkpoint's shard files for another layout (any layout also "
                                            "loads any checkpoint directly; this is the offline form)");
  re->add_option("source", args->dir, "A training checkpoint (ckpt.dir/step-N) or a ckpt.dir (its latest valid "
                                      "checkpoint)")->required();
  re->add_option("--layout", args->layout, "Target layout: tp=..,pp=..[,dp=..,zero=..,vpp=..,schedule=..,stage_layers=3/2/..]")->required();
  re->add_option("-o,--out", args->out, "Output ckpt.dir (the checkpoint goes to OUT/step-N)")->required();
  re->add_flag("--force", args->force, "Replace an existing OUT/step-N");
  return {sub, [args, inspect, exp, imp, re] {
            if (inspect->parsed()) return run_inspect(*args);
            if (exp->parsed()) return run_export(*args);
            if (imp->parsed()) return run_import(*args);
            if (re->parsed()) return run_reshard(*args);
            return kExitBadInput;
          }};
}

}  // namespace tera::cli
