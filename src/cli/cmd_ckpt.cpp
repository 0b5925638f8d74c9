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
// Export and import are cmd_ckpt_export.cpp; what both files share is
// ckpt_args.h.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_llama.h"
#include "ckpt/model_checkpoint.h"
#include "ckpt/model_source.h"
#include "ckpt/reshard.h"
#include "cli/ckpt_args.h"
#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/output_paths.h"
#include "core/file_util.h"
#include "core/format.h"
#include "partition/parallel_layout.h"
#include "data/tokenizer_file.h"
#include "partition/layout_check.h"

namespace tera::cli {

namespace fs = std::filesystem;

int bad_input(const std::string& msg) {
  print_error(msg);
  return kExitBadInput;
}

Expected<BpeTokenizer> source_tokenizer(const ModelSourceReader& src) {
  return tokenizer_from_reference(src.tokenizer(), src.tokenizer_base(), src.tokenizer_where());
}

Expected<ModelSourceReader> open_source(const std::string& path, int64_t heads) {
  auto source = resolve_model_source(path);
  if (!source) return source.status();
  ModelSourceOptions opt;
  opt.heads = heads;
  return ModelSourceReader::open(*source, opt);
}

ExportPaths export_paths(const std::string& out) {
  const fs::path parent = fs::path(out).has_parent_path() ? fs::path(out).parent_path() : fs::path(".");
  return {(parent / "config.json").string(), (parent / "vocab.json").string(), (parent / "merges.txt").string(),
          (parent / "tokenizer.json").string()};
}

std::vector<InputPath> source_inputs(const ModelSourceReader& src, const std::string& given) {
  std::vector<InputPath> in = {{given, "the source"}, {src.source().path, "the source"}};
  if (src.source().kind == ModelSourceKind::safetensors) {
    const ExportPaths beside = export_paths(src.source().path);
    for (const std::string& p : {beside.config, beside.vocab, beside.merges, beside.tokenizer}) in.push_back({p, "the source's"});
  }
  in.push_back({tokenizer_reference_path(src.tokenizer(), src.tokenizer_base()), "the source's tokenizer"});
  return in;
}

namespace {

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

int run_reshard(const CkptArgs& a) {
  // The planner's layout strings; dp and zero are only recorded (the files
  // depend on tp and pp), so dp may be left out.
  const bool has_dp = ("," + a.layout).find(",dp=") != std::string::npos;
  auto layout = parse_layout(has_dp ? a.layout : a.layout + ",dp=1", /*gpus=*/0);
  if (!layout) {
    print_error("--layout: " + layout.error());
    return kExitBadInput;
  }
  if (layout->shard > 0) {
    print_error("--layout: shard (hybrid sharding) is a planner key; tera's runtime shards ZeRO's states over the "
                "whole data-parallel group: leave shard out");
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
  // The one layout check (partition/layout_check.h): the files depend on tp, pp
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
