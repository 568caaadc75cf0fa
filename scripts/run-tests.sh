#!/usr/bin/env bash
# Install dependencies, build everything (tests and benchmarks) and run the
# test suite. Exit status is the suite's.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd build
ctest --output-on-failure -j 2
