// What `tera ckpt`'s subcommands share inside cli/: their arguments and the
// helpers that open a model source, name its tokenizer and list what
// reading it reads (cmd_ckpt.cpp: inspect, reshard and the registration;
// cmd_ckpt_export.cpp: export and import).
#pragma once

#include <string>
#include <vector>

#include "ckpt/model_source.h"
#include "cli/output_paths.h"
#include "cli/tokenizer_flags.h"
#include "data/bpe_tokenizer.h"

namespace tera::cli {

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

// print_error(msg); the bad-input exit code.
int bad_input(const std::string& msg);
// The tokenizer a source records.
Expected<BpeTokenizer> source_tokenizer(const ModelSourceReader& src);
// Resolves and opens SOURCE; a safetensors file's heads from --heads when no config.json is beside it.
Expected<ModelSourceReader> open_source(const std::string& path, int64_t heads);

// The files export writes beside --out (GPT-2's names, fixed by Hugging Face).
struct ExportPaths {
  std::string config, vocab, merges, tokenizer;
};
ExportPaths export_paths(const std::string& out);

// What reading a source reads: the source itself, the config.json and
// GPT-2 tokenizer files beside a safetensors file, a tokenizer it names.
std::vector<InputPath> source_inputs(const ModelSourceReader& src, const std::string& given);

int run_export(const CkptArgs& a);
int run_import(const CkptArgs& a);

}  // namespace tera::cli
