#!/usr/bin/env bash
# Configures and builds Strata into build/ (Release with debug info, Ninja,
# ccache when present). Extra arguments are passed to the build tool, e.g.
# `scripts/build.sh strata` builds only the CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/strata-ccache}"
# Hits across checkouts at other paths (every CI run is a fresh clone):
# paths under the checkout are hashed relative to it, and the build
# directory's path is not hashed (CCACHE_NOHASHDIR; debug info keeps the
# first compile's directory).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd)}" CCACHE_NOHASHDIR=1
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
# Two cores and heavy headers: more than two jobs only thrashes.
cmake --build build -j "${STRATA_JOBS:-2}" -- "$@"
