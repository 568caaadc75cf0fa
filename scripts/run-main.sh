#!/usr/bin/env bash
# The main job: install dependencies, build, then estimate and plan the
# embedded default scenario (builtin:seed). Writes build/seed.plan.json.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh strata
echo "== strata estimate (builtin:seed)"
build/cli/strata estimate
echo "== strata plan (builtin:seed)"
build/cli/strata plan -o build/seed.plan.json
