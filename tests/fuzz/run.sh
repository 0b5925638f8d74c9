#!/usr/bin/env bash
# The bounded fuzz run for CI: installs clang + libFuzzer (scripts/setup fuzz),
# builds the fuzz preset's targets (build-fuzz/) and runs each from its seed
# corpus for a fixed number of inputs (ctest --preset fuzz). Exits non-zero on
# any crash, sanitizer report or failed check.
set -euo pipefail
cd "$(dirname "$0")/../.."
./scripts/setup fuzz
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
ctest --preset fuzz "$@"
