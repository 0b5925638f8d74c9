// Always-on and debug-only assertions for programming errors (not bad input:
// user- and file-facing errors go through Status / Expected in status.h).
// TERA_ASSERT aborts with file:line and the failed expression in every build;
// TERA_DASSERT compiles away in release builds (NDEBUG).
#pragma once

#include <cstdint>
#include <string>

namespace tera {

[[noreturn]] void assert_fail(const char* expr, const char* file, int line, const std::string& msg);

// Splits n into d equal parts; aborts if d does not divide n. Used for every
// runtime split (heads / tp, layers / pp, ...) so a silent floor never happens.
int64_t divide(int64_t n, int64_t d);

}  // namespace tera

#define TERA_ASSERT(cond, ...)                                                     \
  do {                                                                             \
    if (!(cond)) ::tera::assert_fail(#cond, __FILE__, __LINE__, ::std::string{__VA_ARGS__}); \
  } while (0)

#ifdef NDEBUG
#define TERA_DASSERT(cond, ...) \
  do {                          \
  } while (0)
#else
#define TERA_DASSERT(cond, ...) TERA_ASSERT(cond, __VA_ARGS__)
#endif
