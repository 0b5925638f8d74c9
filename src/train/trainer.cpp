// Training loop; see trainer.h.
#include "train/trainer.h"

#include <cmath>
#include <filesystem>

#include "ckpt/model_checkpoint.h"
#include "core/timer.h"
#include "optim/grad_clip.h"
#include "data/training_data.h"
#include "config/config.h"

namespace tera {

Expected<std::unique_ptr<Trainer>> Trainer::create(const RunConfig& cfg, const Backend& backend) {
  auto t = std::unique_ptr<Trainer>(new Trainer(cfg, backend));
  const int64_t T = cfg.model.seq_len;
  auto data = open_training_data(cfg);
  if (!data) return data.status();
  t->data_ = std::move(*data);
  t->model_ = std::make_unique<Gpt>(ModelSpec(cfg.model), backend, cfg.train.micro_batch);
  t->model_->init_parameters(cfg.train.seed);
  t->opt_ = std::make_unique<AdamW>(t->model_->table(), cfg.train.adamw);
  t->schedule_ = LrSchedule{cfg.train.lr, cfg.train.min_lr, cfg.train.warmup, cfg.train.steps};
  t->tokens_.resize(static_cast<size_t>(cfg.train.micro_batch * T));
  t->targets_.resize(t->tokens_.size());
  return t;
}

StepStats Trainer::step() {
  const TrainConfig& tc = cfg_.train;
  const int64_t T = cfg_.model.seq_len, mb = tc.micro_batch, G = tc.global_batch;
  const int64_t s = next_step_++;
  Stopwatch sw;
  model_->zero_grads();
  const float dloss = static_cast<float>(1.0 / static_cast<double>(G * T));
  double loss_sum = 0;
  for (int64_t k = 0; k < tc.accumulation(); ++k) {
    data_.sampler->fill(s * G + k * mb, mb, tokens_.data(), targets_.data());
    loss_sum += model_->forward_backward(tokens_.data(), targets_.data(), mb, T, dloss);
  }
  const double norm = std::sqrt(be_.sum_squares(model_->grads(), model_->table().total_floats()));
  const float lr = schedule_.at(s);
  opt_->step(be_, model_->params(), model_->grads(), lr, clip_coefficient(norm, tc.clip), s + 1);
  StepStats st;
  st.step = s + 1;
  st.total = tc.steps;
  st.loss = loss_sum / static_cast<double>(G * T);
  st.lr = lr;
  st.grad_norm = norm;
  st.seconds = sw.seconds();
  st.tokens_per_s = static_cast<double>(G * T) / st.seconds;
  st.gflops = st.tokens_per_s * model_->spec().train_flops_per_token() / 1e9;
  const bool last = st.step == tc.steps;
  if ((tc.eval_every > 0 && st.step % tc.eval_every == 0) || last) st.val_loss = evaluate();
  return st;
}

double Trainer::evaluate() {
  const int64_t T = cfg_.model.seq_len, mb = cfg_.train.micro_batch;
  double sum = 0;
  for (int64_t k = 0; k < cfg_.train.eval_batches; ++k) {
    fill_sequential_windows(*data_.val, T, k * mb, mb, tokens_.data(), targets_.data());
    sum += model_->forward_loss(tokens_.data(), targets_.data(), mb, T);
  }
  return sum / static_cast<double>(cfg_.train.eval_batches * mb * T);
}

Status Trainer::run(const std::function<void(const StepStats&)>& on_step) {
  while (next_step_ < cfg_.train.steps) on_step(step());
  return Status::ok();
}

Status Trainer::save_final() const {
  CheckpointMeta meta;
  meta.model = cfg_.model;
  meta.step = next_step_;
  meta.tokenizer = data_.tokenizer;
  meta.extra = {{"config_toml", run_config_to_toml(cfg_)}, {"micro_batch", cfg_.train.micro_batch}};
  const std::string dir = (std::filesystem::path(cfg_.out.dir) / "final").string();
  return save_model_checkpoint(dir, model_->table(), model_->params(), meta);
}

MemoryReport Trainer::memory() const {
  MemoryReport r = model_->memory();
  r.optimizer = opt_->bytes();
  return r;
}

}  // namespace tera
