// What a training run writes, checked before any work: its outputs
// (--metrics, --trace, out.dir's final weights, the checkpoint root's
// step-N) against its inputs (the config, the data, the tokenizer,
// ckpt.init) and against each other (core/path_overlap.h), and the earlier
// results it would replace: another run's final weights in out.dir, or
// checkpoints (and a final) newer than the one a run resumes. Invariant: a
// run replaces or deletes nothing it did not write itself unless the user
// named it (--start-over, --discard-newer).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "config/run_config.h"
#include "core/status.h"

namespace tera {

// Where checkpoints go: ckpt.dir, or out.dir/checkpoints when it is empty
// (preemption and bad-step checkpoints are written even then).
std::string checkpoint_root(const RunConfig& cfg);

// Every output of the run against every input and every other output; also
// refuses out.dir or ckpt.dir = "/" (a run's outputs need a directory of
// their own). `config` is the --config file; metrics / trace may be empty.
Status check_run_paths(const RunConfig& cfg, const std::string& config, const std::string& metrics,
                       const std::string& trace);

// A fresh run (no --resume, or --resume auto that found no checkpoint:
// auto_found_nothing) into an out.dir that holds a `final`: refused unless
// start_over (then the new final replaces it once complete).
Status claim_final_dir(const RunConfig& cfg, bool start_over, bool auto_found_nothing);

// A run resumed at `step` into a checkpoint root that holds later
// checkpoints, or an out.dir whose final is later: refused, naming them,
// unless discard_newer, which deletes the newer checkpoints now (the final
// is replaced at the end). With later_checkpoints_invalid (--resume auto
// took the newest valid one) the later ones were found invalid and named
// already: only a later final counts. `log` receives what was deleted.
Status check_newer_than_resumed(const RunConfig& cfg, int64_t step, bool discard_newer, bool later_checkpoints_invalid,
                                const std::function<void(const std::string&)>& log);

}  // namespace tera
