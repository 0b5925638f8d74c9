// Output that survives its reader; see console.h.
#include "cli/console.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>

namespace tera::cli {

namespace {

void (*g_hook)(int) = nullptr;
bool g_out_lost = false;  // stdout went away (its output goes to /dev/null)

void write_or_stop(std::FILE* stream, std::string_view text) {
  if (std::fwrite(text.data(), 1, text.size(), stream) == text.size() && std::fflush(stream) == 0) return;
  if (stream == stdout) g_out_lost = true;
  const int err = errno;
  // Whatever failed, this stream is done: the rest of its output is dropped,
  // so a full disk or a dead pipe never stops the work it reports on.
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, ::fileno(stream));
    ::close(null);
  }
  std::clearerr(stream);
  if (g_hook != nullptr && (err == EPIPE || err == EIO)) g_hook(err == EPIPE ? SIGPIPE : SIGHUP);
}

}  // namespace

void set_console_lost_hook(void (*hook)(int sig)) { g_hook = hook; }

void print_out(std::string_view text) { write_or_stop(stdout, text); }

void print_err(std::string_view text) { write_or_stop(stderr, text); }

void print_note(std::string_view text) {
  if (!g_out_lost) print_out(text);
  if (g_out_lost) print_err(text);  // also when this very write found stdout gone
}

}  // namespace tera::cli
