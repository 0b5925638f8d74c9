// Opening the run's datasets (byte tokens for now).
#include "data/training_data.h"

namespace tera {

Expected<TrainingData> open_training_data(const RunConfig& cfg) {
  TrainingData d;
  const DataConfig& dc = cfg.data;
  if (dc.val.empty()) {
    auto tr = ByteDataset::open(dc.train, 0.0, 1.0 - dc.val_fraction);
    if (!tr) return tr.status();
    auto va = ByteDataset::open(dc.train, 1.0 - dc.val_fraction, 1.0);
    if (!va) return va.status();
    d.train = std::move(*tr);
    d.val = std::move(*va);
  } else {
    auto tr = ByteDataset::open(dc.train);
    if (!tr) return tr.status();
    auto va = ByteDataset::open(dc.val);
    if (!va) return va.status();
    d.train = std::move(*tr);
    d.val = std::move(*va);
  }
  const int64_t T = cfg.model.seq_len;
  const std::string val_what = dc.val.empty()
                                   ? "the held-out tail (data.val_fraction) of data.train = \"" + dc.train + "\""
                                   : "data.val = \"" + dc.val + "\"";
  TERA_RETURN_IF_ERROR(check_dataset_fits(*d.train, T, "data.train = \"" + dc.train + "\""));
  TERA_RETURN_IF_ERROR(check_dataset_fits(*d.val, T, val_what));
  if (cfg.model.vocab < d.train->vocab()) {
    return Status::error(cfg.source + ": model.vocab = " + std::to_string(cfg.model.vocab) +
                         " is smaller than the data's vocabulary (" + std::to_string(d.train->vocab()) +
                         " byte tokens); set model.vocab >= " + std::to_string(d.train->vocab()));
  }
  d.sampler = std::make_unique<RandomWindowSampler>(*d.train, T, cfg.train.seed);
  return d;
}

}  // namespace tera
