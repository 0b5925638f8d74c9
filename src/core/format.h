// Human-readable numbers for logs: bytes (KiB/MiB/GiB) and durations (1h02m, 3m05s, 12.3s).
#pragma once

#include <cstdint>
#include <string>

namespace tera {

std::string human_bytes(int64_t bytes);
std::string human_duration(double seconds);
std::string human_count(double n);  // 124.4M, 3.1B

}  // namespace tera
