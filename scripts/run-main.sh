#!/usr/bin/env bash
# The main job: install dependencies, build, then estimate, plan, simulate and
# run for real the embedded default scenario (builtin:seed). Writes
# build/seed.plan.json, build/seed.trace.json (simulated) and
# build/seed.run.trace.json (executed); open them in https://ui.perfetto.dev
# or strata-gui.
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
echo "== strata run (builtin:seed, NVMe files under build/nvme)"
build/cli/strata run --steps 5 --nvme-dir build/nvme --trace build/seed.run.trace.json
