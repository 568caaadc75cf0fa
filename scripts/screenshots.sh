#!/usr/bin/env bash
# Regenerates the README's screenshots with the headless GUI:
#   docs/images/seed.png            the seed scenario's simulated timeline
#   docs/images/compare-lfu-fifo.png two eviction policies on one time scale
# Run after scripts/build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
build/gui/strata-gui --screenshot docs/images/seed.png builtin:seed
study=papers/policy-study/gpt-1.3b-nvme.yaml
for p in lfu fifo; do
  build/cli/strata simulate "$study" --set policy.eviction=$p --set policy.gpu_cache=2GiB \
    --set policy.cpu_cache=256MiB --trace "$tmp/$p.json" > /dev/null
done
build/gui/strata-gui --screenshot docs/images/compare-lfu-fifo.png --size 1400x1300 "$tmp/lfu.json" --compare "$tmp/fifo.json"
echo "wrote docs/images/seed.png and docs/images/compare-lfu-fifo.png"
