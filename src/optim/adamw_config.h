// AdamW hyper-parameters (pure data: the config library and the planner read it).
#pragma once

namespace tera {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

}  // namespace tera
