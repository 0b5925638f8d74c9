// Output that survives its reader. A write that finds stdout's or stderr's
// reader gone (EPIPE: `tera train | head`, a tee that died) or its terminal
// gone (EIO: the ssh session dropped) stops that stream, whose later output
// goes to /dev/null, and reports it once to the hook (`tera train`: a stop
// request, so the run checkpoints at the step boundary); the process goes
// on. fmt::print would throw on such a write (fmt 9), ending the process.
#pragma once

#include <string_view>

namespace tera::cli {

// Called once per stream that goes away, with SIGPIPE (reader gone) or
// SIGHUP (terminal gone); must be async-signal-safe-simple (no allocation).
void set_console_lost_hook(void (*hook)(int sig));
// Writes and flushes `text` to stdout / stderr.
void print_out(std::string_view text);
void print_err(std::string_view text);
// What the run does (a checkpoint, a stop, how it ended): stdout, or stderr
// once stdout has gone away, so the news of a stop still reaches someone.
void print_note(std::string_view text);

}  // namespace tera::cli
