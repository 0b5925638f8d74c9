#!/usr/bin/env bash
# The bounded fuzz run for CI: installs clang + libFuzzer (scripts/setup fuzz),
# builds the fuzz preset's targets (build-fuzz/) and runs each from its seed
# corpus for a fixed number of inputs (ctest --preset fuzz). Exits non-zero on
# any crash, sanitizer report or failed check.
set -euo pipefail
cd "$(dirname "$0")/../.."
./scripts/setup fuzz
# TERA_FUZZ_SECONDS / TERA_FUZZ_RUNS (environment) cap each target's run.
cmake --preset fuzz -DTERA_FUZZ_SECONDS="${TERA_FUZZ_SECONDS:-60}" -DTERA_FUZZ_RUNS="${TERA_FUZZ_RUNS:-100000}" >/dev/null
cmake --build --preset fuzz
ctest --preset fuzz "$@"
