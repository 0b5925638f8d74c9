// `tera ckpt export` (Hugging Face GPT-2 or Llama names, sharded above
// --max-shard-size, fp32 or bf16, the tokenizer beside) and `tera ckpt
// import` (a safetensors file or any tera model source into a self-contained
// tera-model directory); see cmd_ckpt.cpp for the command's summary.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <vector>

#include "ckpt/hf_gpt2.h"
#include "ckpt/hf_llama.h"
#include "ckpt/model_checkpoint.h"
#include "ckpt/safetensors_index.h"
#include "cli/ckpt_args.h"
#include "cli/commands.h"
#include "core/file_util.h"
#include "data/tokenizer_file.h"

namespace tera::cli {

namespace fs = std::filesystem;

namespace {

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

// The tokenizer files beside an export: tokenizer.json always, GPT-2's pair
// too where it can say the same (GPT-2's pattern and rules, <|endoftext|>
// its only special token); a byte-level model none, and an earlier export's
// that this one does not rewrite are removed (import would read them back
// as this model's). Returns the note for the summary line.
Expected<std::string> write_tokenizer_files(const BpeTokenizer& tok, const ExportPaths& side) {
  std::string note = "byte-level model: no tokenizer files";
  auto remove_earlier = [&](const std::string& p) {
    std::error_code ec;
    if (fs::remove(p, ec)) note += "; removed the earlier export's " + fs::path(p).filename().string();
  };
  if (tok.is_bytes()) {
    for (const std::string& p : {side.vocab, side.merges, side.tokenizer}) remove_earlier(p);
    return note;
  }
  TERA_RETURN_IF_ERROR(save_tokenizer(tok, side.tokenizer));
  note = fmt::format("tokenizer ({} tokens) as tokenizer.json", tok.vocab_size());
  if (gpt2_files_can_hold(tok)) {
    TERA_RETURN_IF_ERROR(save_gpt2_tokenizer(tok, side.vocab, side.merges));
    note += " and vocab.json + merges.txt";
  } else {
    for (const std::string& p : {side.vocab, side.merges}) remove_earlier(p);
  }
  return note;
}

// --out, the files beside it and an earlier export's shards: replaced only
// with --force, never inside the checkpoint exported.
Status check_export_outputs(const CkptArgs& a, const ExportPaths& side, const std::vector<std::string>& earlier) {
  TERA_RETURN_IF_ERROR(check_output_file(a.out, "--out", a.force, /*create_parent=*/true));
  for (const std::string& p : earlier) {
    TERA_RETURN_IF_ERROR(refuse_existing(p, "--out " + a.out + " writes its shards beside it", a.force));
  }
  for (const std::string& p : {side.config, side.vocab, side.merges, side.tokenizer}) {
    TERA_RETURN_IF_ERROR(refuse_existing(p, "--out " + a.out + " writes beside it", a.force));
  }
  if (is_within(a.out, a.dir) || same_file(a.out, a.dir)) {
    return Status::error("--out " + a.out + ": is inside the checkpoint it exports (" + a.dir + "); write it elsewhere");
  }
  return ok_status();
}

}  // namespace

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
  const std::vector<std::string> earlier = earlier_export_weights(a.out);
  if (Status s = check_export_outputs(a, side, earlier); !s) return bad_input(s.message());
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
  auto tok_note = write_tokenizer_files(*tok, side);
  if (!tok_note) {
    print_error("the weights were written but not the tokenizer: " + tok_note.error());
    return kExitFailure;
  }
  const std::string where = written->size() == 1
                                ? a.out
                                : fmt::format("{} shards of at most {} tensor bytes, read through {}",
                                              written->size() - 1, *max_shard, written->back());
  fmt::print("exported {} tensors to {} (Hugging Face {} names, {}; config.json beside it; {}{})\n", weights->size(),
             where, llama ? "Llama" : "GPT-2", opt.bf16 ? "bf16" : "fp32", *tok_note, stale_note);
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

}  // namespace tera::cli
