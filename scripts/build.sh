#!/usr/bin/env bash
# Configures and builds Strata into build/ (Release with debug info, Ninja,
# ccache when present). Extra arguments are passed to the build tool, e.g.
# `scripts/build.sh strata` builds only the CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/ccache-env.sh
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
# Two cores and heavy headers: more than two jobs only thrashes.
cmake --build build -j "${STRATA_JOBS:-2}" -- "$@"
