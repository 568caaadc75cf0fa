#!/usr/bin/env bash
# The main job: install dependencies, build, then estimate, plan and simulate
# the embedded default scenario (builtin:seed). Writes build/seed.plan.json and
# build/seed.trace.json (open it in https://ui.perfetto.dev).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh strata
echo "== strata estimate (builtin:seed)"
build/cli/strata estimate
echo "== strata plan (builtin:seed)"
build/cli/strata plan -o build/seed.plan.json
echo "== strata simulate (builtin:seed)"
build/cli/strata simulate --trace build/seed.trace.json --csv build/seed.ops.csv
