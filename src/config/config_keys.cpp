// The run config's key table: every key, its TOML kind and the RunConfig
// field it sets (config_internal.h).
#include <cstdint>
#include <fmt/format.h>
#include <limits>

#include "config/config_internal.h"

namespace tera::config_internal {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::integer: return "an integer";
    case Kind::number:
    case Kind::number32: return "a number";
    case Kind::string: return "a string";
    case Kind::boolean: return "true or false";
    case Kind::integer_array: return "an array of integers";
    case Kind::blend: return "an array of [weight, \"prefix\"] pairs";
  }
  return "?";
}


std::vector<Field> schema() {
  auto i64 = [](auto member) {
    return [member](RunConfig& c, const toml::node& n) { member(c) = n.value<int64_t>().value(); };
  };
  auto f32 = [](auto member) {
    return [member](RunConfig& c, const toml::node& n) { member(c) = static_cast<float>(n.value<double>().value()); };
  };
  auto f64 = [](auto member) {
    return [member](RunConfig& c, const toml::node& n) { member(c) = n.value<double>().value(); };
  };
  auto str = [](auto member) {
    return [member](RunConfig& c, const toml::node& n) { member(c) = n.value<std::string>().value(); };
  };
  // An int field: a value beyond int's range is reported, not wrapped.
  auto i32 = [](const char* key, auto member) {
    return [key, member](RunConfig& c, const toml::node& n) {
      const int64_t v = n.value<int64_t>().value();
      if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
        if (c.range_error.empty()) c.range_error = fmt::format("{} = {} is out of range", key, v);
        return;
      }
      member(c) = static_cast<int>(v);
    };
  };
  using R = RunConfig&;
  return {
      {"model.layers", Kind::integer, i64([](R c) -> int64_t& { return c.model.layers; })},
      {"model.hidden", Kind::integer, i64([](R c) -> int64_t& { return c.model.hidden; })},
      {"model.heads", Kind::integer, i64([](R c) -> int64_t& { return c.model.heads; })},
      {"model.seq_len", Kind::integer, i64([](R c) -> int64_t& { return c.model.seq_len; })},
      {"model.vocab", Kind::integer, i64([](R c) -> int64_t& { return c.model.vocab; })},
      {"model.ffn_hidden", Kind::integer, i64([](R c) -> int64_t& { return c.model.ffn_hidden; })},
      {"model.kv_heads", Kind::integer, i64([](R c) -> int64_t& { return c.model.kv_heads; })},
      {"model.mlp", Kind::string,
       [](R c, const toml::node& n) {
         auto k = parse_mlp_kind(n.as_string()->get());
         if (k.ok()) {
           c.model.mlp = *k;
         } else {
           c.mlp_error = k.error();
         }
       }},
      {"model.arch", Kind::string,
       [](R c, const toml::node& n) {
         auto a = parse_arch(n.as_string()->get());
         if (a.ok()) {
           c.model.arch = *a;
         } else {
           c.arch_error = a.error();
         }
       }},
      {"model.rope_theta", Kind::number, f64([](R c) -> double& { return c.model.rope_theta; })},
      {"model.norm_eps", Kind::number, f64([](R c) -> double& { return c.model.norm_eps; })},
      {"model.rope_scaling", Kind::string,
       [](R c, const toml::node& n) {
         const std::string& v = n.as_string()->get();
         if (v == "llama3" || v == "none") {
           c.model.rope_scaling.llama3 = v == "llama3";
         } else {
           c.rope_scaling_error = "model.rope_scaling = \"" + v +
                                  "\" is not a known scaling; choose \"llama3\" (Llama 3.1) or \"none\"";
         }
       }},
      {"model.rope_factor", Kind::number, f64([](R c) -> double& { return c.model.rope_scaling.factor; })},
      {"model.rope_low_freq_factor", Kind::number,
       f64([](R c) -> double& { return c.model.rope_scaling.low_freq_factor; })},
      {"model.rope_high_freq_factor", Kind::number,
       f64([](R c) -> double& { return c.model.rope_scaling.high_freq_factor; })},
      {"model.rope_original_seq_len", Kind::integer,
       i64([](R c) -> int64_t& { return c.model.rope_scaling.original_max_positions; })},
      {"model.tie_embeddings", Kind::boolean,
       [](R c, const toml::node& n) { c.model.tie_embeddings = n.value<bool>().value() ? 1 : 0; }},
      {"model.attention", Kind::string,
       [](R c, const toml::node& n) {
         auto k = parse_attention_kind(n.as_string()->get());
         if (k.ok()) {
           c.model.attention = *k;
         } else {
           c.attention_error = k.error();
         }
       }},
      {"model.vocab_align", Kind::integer, i64([](R c) -> int64_t& { return c.model.vocab_align; })},
      {"train.steps", Kind::integer, i64([](R c) -> int64_t& { return c.train.steps; })},
      {"train.micro_batch", Kind::integer, i32("train.micro_batch", [](R c) -> int& { return c.parallel.micro_batch; })},
      {"train.global_batch", Kind::integer, i64([](R c) -> int64_t& { return c.train.global_batch; })},
      {"train.lr", Kind::number32, f32([](R c) -> float& { return c.train.lr; })},
      {"train.min_lr", Kind::number32, f32([](R c) -> float& { return c.train.min_lr; })},
      {"train.warmup", Kind::integer, i64([](R c) -> int64_t& { return c.train.warmup; })},
      {"train.weight_decay", Kind::number32, f32([](R c) -> float& { return c.train.adamw.weight_decay; })},
      {"train.beta1", Kind::number32, f32([](R c) -> float& { return c.train.adamw.beta1; })},
      {"train.beta2", Kind::number32, f32([](R c) -> float& { return c.train.adamw.beta2; })},
      {"train.eps", Kind::number32, f32([](R c) -> float& { return c.train.adamw.eps; })},
      {"train.clip", Kind::number32, f32([](R c) -> float& { return c.train.clip; })},
      {"train.seed", Kind::integer,
       [](R c, const toml::node& n) { c.train.seed = static_cast<uint64_t>(n.value<int64_t>().value()); }},
      {"train.recompute", Kind::string,
       [](R c, const toml::node& n) {
         const std::string& v = n.as_string()->get();  // the schema checked the type
         if (auto r = parse_recompute(v)) {
           c.parallel.recompute = *r;
         } else {
           c.recompute_name_error = v;
         }
       }},
      {"train.backend", Kind::string, str([](R c) -> std::string& { return c.train.backend; })},
      {"train.device_comm", Kind::string, str([](R c) -> std::string& { return c.train.device_comm; })},
      {"train.precision", Kind::string,
       [](R c, const toml::node& n) {
         const std::string& v = n.as_string()->get();
         if (v == "fp32") {
           c.train.precision = DType::f32;
         } else if (v == "bf16") {
           c.train.precision = DType::bf16;
         } else {
           c.precision_error = v;
         }
       }},
      {"train.eval_every", Kind::integer, i64([](R c) -> int64_t& { return c.train.eval_every; })},
      {"train.eval_sequences", Kind::integer, i64([](R c) -> int64_t& { return c.train.eval_sequences; })},
      {"data.train", Kind::string, str([](R c) -> std::string& { return c.data.train; })},
      {"data.val", Kind::string, str([](R c) -> std::string& { return c.data.val; })},
      {"data.val_fraction", Kind::number, f64([](R c) -> double& { return c.data.val_fraction; })},
      {"data.tokenizer", Kind::string, str([](R c) -> std::string& { return c.data.tokenizer; })},
      {"data.tokenizer_pattern", Kind::string, str([](R c) -> std::string& { return c.data.tokenizer_pattern; })},
      {"data.tokenizer_specials", Kind::string, str([](R c) -> std::string& { return c.data.tokenizer_specials; })},
      {"data.blend", Kind::blend,
       [](R c, const toml::node& n) {
         c.data.blend.clear();
         for (const auto& e : *n.as_array()) {
           const toml::array& pair = *e.as_array();
           c.data.blend.push_back({pair[0].value<double>().value(), pair[1].value<std::string>().value()});
         }
       }},
      {"parallel.tp", Kind::integer, i32("parallel.tp", [](R c) -> int& { return c.parallel.tp; })},
      {"parallel.pp", Kind::integer, i32("parallel.pp", [](R c) -> int& { return c.parallel.pp; })},
      {"parallel.dp", Kind::integer, i32("parallel.dp", [](R c) -> int& { return c.parallel.dp; })},
      {"parallel.cp", Kind::integer, i32("parallel.cp", [](R c) -> int& { return c.parallel.cp; })},
      {"parallel.sequence_parallel", Kind::boolean,
       [](R c, const toml::node& n) { c.parallel.sequence_parallel = n.value<bool>().value(); }},
      {"parallel.schedule", Kind::string,
       [](R c, const toml::node& n) {
         const std::string& v = n.as_string()->get();
         auto k = parse_schedule_kind(v);
         if (k.ok()) {
           c.parallel.schedule = *k;
         } else {
           c.schedule_error = v;
         }
       }},
      {"parallel.vpp", Kind::integer, i32("parallel.vpp", [](R c) -> int& { return c.parallel.vpp; })},
      {"parallel.stage_layers", Kind::integer_array,
       [](R c, const toml::node& n) {
         c.parallel.stage_layers.clear();
         for (const auto& e : *n.as_array()) c.parallel.stage_layers.push_back(e.value<int64_t>().value());
       }},
      {"parallel.zero", Kind::integer, i32("parallel.zero", [](R c) -> int& { return c.parallel.zero; })},
      {"out.dir", Kind::string, str([](R c) -> std::string& { return c.out.dir; })},
      {"train.max_bad_steps", Kind::integer, i64([](R c) -> int64_t& { return c.train.max_bad_steps; })},
      {"train.comm_timeout_s", Kind::number, f64([](R c) -> double& { return c.train.comm_timeout_s; })},
      {"ckpt.dir", Kind::string, str([](R c) -> std::string& { return c.ckpt.dir; })},
      {"ckpt.every", Kind::integer, i64([](R c) -> int64_t& { return c.ckpt.every; })},
      {"ckpt.keep", Kind::integer, i64([](R c) -> int64_t& { return c.ckpt.keep; })},
      {"ckpt.init", Kind::string, str([](R c) -> std::string& { return c.ckpt.init; })},
  };
}

}  // namespace tera::config_internal
