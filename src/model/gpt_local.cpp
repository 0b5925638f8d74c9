// The one-process model: the whole model on one stage of one rank, with
// resident parameters (LocalParamMemory) and a single-rank tensor-parallel
// group; what evaluation, generation and the model's tests use. Training
// under a layout goes through the engine (train/engine.h) instead.
#include <vector>

#include "core/check.h"
#include "model/gpt.h"

namespace tera {

Gpt::Gpt(const ModelSpec& spec, const Backend& backend, int64_t max_batch)
    : spec_(spec),
      be_(backend),
      max_batch_(max_batch),
      split_{1, 0, spec_.config().seq_len},
      own_table_(std::make_unique<ParamTable>(spec_)),
      own_rank_memory_(std::make_unique<RankMemory>(backend, single_process_plan(spec_, *own_table_, max_batch))),
      own_memory_(std::make_unique<LocalParamMemory>(*own_table_, backend, *own_rank_memory_)),
      own_tp_(std::make_unique<SingleRankTensorParallel>(backend)),
      table_(*own_table_),
      mem_(*own_memory_),
      tp_(*own_tp_),
      rank_memory_(*own_rank_memory_) {
  init_buffers(resident_rank_plan(spec_, *own_table_, max_batch));
}

MemoryPlan Gpt::single_process_plan(const ModelSpec& spec, const ParamTable& table, int64_t max_batch) {
  MemoryPlan plan = resident_memory_plan(spec, table, max_batch);
  plan.mutable_arena(MemoryClass::optimizer) = ArenaLayout(memory_class_name(MemoryClass::optimizer));
  return plan;
}

float* Gpt::params() {
  TERA_ASSERT(own_memory_ != nullptr, "params() needs resident memory");
  return own_memory_->params();
}
const float* Gpt::params() const {
  TERA_ASSERT(own_memory_ != nullptr, "params() needs resident memory");
  return own_memory_->params();
}
float* Gpt::grads() {
  TERA_ASSERT(own_memory_ != nullptr, "grads() needs resident memory");
  return own_memory_->grad_base();
}
void Gpt::init_parameters(uint64_t seed) {
  TERA_ASSERT(own_memory_ != nullptr, "init_parameters() needs resident memory");
  const std::vector<float> host = [&] {
    std::vector<float> h(static_cast<size_t>(table_.total_floats()));
    tera::init_parameters(table_, h.data(), seed);
    return h;
  }();
  load_parameters(host.data());
}
void Gpt::zero_grads() {
  TERA_ASSERT(own_memory_ != nullptr, "zero_grads() needs resident memory");
  own_memory_->zero_grads();
}
std::vector<float> Gpt::parameters_to_host() const {
  std::vector<float> h(static_cast<size_t>(table_.total_floats()));
  be_.copy(h.data(), params(), table_.total_floats() * 4, CopyKind::device_to_host);
  return h;
}
std::vector<float> Gpt::gradients_to_host() const {
  TERA_ASSERT(own_memory_ != nullptr, "gradients_to_host() needs resident memory");
  std::vector<float> h(static_cast<size_t>(table_.total_floats()));
  be_.copy(h.data(), own_memory_->grad_base(), table_.total_floats() * 4, CopyKind::device_to_host);
  return h;
}
void Gpt::load_parameters(const float* host) {
  be_.copy(params(), host, table_.total_floats() * 4, CopyKind::host_to_device);
  own_memory_->refresh_compute_weights();
}

namespace {
// Zeroes the loss scalar, runs f, and copies the loss sum to the host.
template <typename F>
double loss_of(const Backend& be, double* loss, F&& f) {
  be.fill(loss, DType::f64, 0.0, 1);
  f();
  double sum = 0;
  be.copy(&sum, loss, sizeof(double), CopyKind::device_to_host);
  return sum;
}
}  // namespace

double Gpt::forward_backward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T, float dloss) {
  TERA_ASSERT(chunks() == 1 && plan().chunks[0].embedding && plan().chunks[0].head, "needs the whole model on this stage");
  return loss_of(be_, step_scalars_ + StepScalars::loss, [&] {
    forward(0, 0, tokens, targets, B, T, dloss, true);
    backward(0, 0, B, T);
  });
}

double Gpt::forward_loss(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T) {
  TERA_ASSERT(chunks() == 1 && plan().chunks[0].embedding && plan().chunks[0].head, "needs the whole model on this stage");
  return loss_of(be_, step_scalars_ + StepScalars::loss, [&] { forward(0, 0, tokens, targets, B, T, 0.0f, false); });
}

void Gpt::head_logits(const float* x, int64_t N) {
  const IoWeights w = acquire_io(Pass::forward);
  layers_->head_logits(w, x, N);
  release_io(Pass::forward);
}

std::vector<float> Gpt::logits(const int32_t* tokens, int64_t B, int64_t T) {
  TERA_ASSERT(tp_.size() == 1 && chunks() == 1, "full logits exist only on one rank holding the whole model");
  forward_body(0, 0, tokens, B, T);
  head_logits(chunk_output(slot(0, 0), chunk_layers(0)), B * T);
  const int64_t Vl = layers_->dims().Vl;
  std::vector<float> host(static_cast<size_t>(B * T * Vl));
  be_.copy(host.data(), layers_->workspace().logits, B * T * Vl * static_cast<int64_t>(sizeof(float)),
           CopyKind::device_to_host);
  return host;
}

void Gpt::next_token_scores(const int32_t* tokens, int64_t T, int64_t V, float temperature, float* host_out) {
  TERA_ASSERT(tp_.size() == 1 && chunks() == 1, "full logits exist only on one rank holding the whole model");
  TERA_ASSERT(T >= 1 && T <= spec_.config().seq_len && V >= 1 && V <= layers_->dims().Vl);
  forward_body(0, 0, tokens, 1, T);
  head_logits(chunk_output(slot(0, 0), chunk_layers(0)) + (T - 1) * spec_.config().hidden, 1);
  float* logits = layers_->workspace().logits;
  if (temperature > 0) be_.softmax_row(logits, logits, V, temperature);  // in place
  be_.copy(host_out, logits, V * static_cast<int64_t>(sizeof(float)), CopyKind::device_to_host);
}

}  // namespace tera
