#!/usr/bin/env bash
# Regenerates the README's screenshots with the headless GUI:
#   docs/images/seed.png            the seed scenario's simulated timeline
#   docs/images/compare-lfu-fifo.png two eviction policies on one time scale
#   docs/images/study-llama2-13b.png the README's study (a sweep --plot)
#   docs/images/zeropp-gpt-18b.png   the README's ZeRO++ sweep
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
# The README's study: Llama-2-13B on one A100, NVMe bandwidth x offload devices.
build/cli/strata sweep scenarios/studies/llama2-13b-a100.yaml \
  --zip hardware.nvme.read_bandwidth=1.6GB/s:25.6GB/s:*2 --zip hardware.nvme.write_bandwidth=1GB/s:16GB/s:*2 \
  --set zero_optimization.offload_param.device=cpu,nvme --set zero_optimization.offload_optimizer.device=cpu,nvme \
  --plot docs/images/study-llama2-13b.png hardware.nvme.read_bandwidth samples_per_s \
  --hue zero_optimization.offload_param.device --hue zero_optimization.offload_optimizer.device \
  -o docs/images/study-llama2-13b.csv 2> /dev/null
# The README's ZeRO++ sweep: nodes x network, ZeRO-3 against ZeRO++.
build/cli/strata sweep scenarios/studies/zeropp-gpt-18b.yaml \
  --set hardware.nodes=2,4,8,16,24 --set hardware.network.nics=1,2,4,8 \
  --zip zero_optimization.zero_hpz_partition_size=1,16 --zip zero_optimization.zero_quantized_weights=false,true \
  --zip zero_optimization.zero_quantized_gradients=false,true \
  --plot docs/images/zeropp-gpt-18b.png hardware.nodes tflops_per_gpu \
  --hue zero_optimization.zero_hpz_partition_size --hue hardware.network.nics \
  -o docs/images/zeropp-gpt-18b.csv 2> /dev/null
echo "wrote docs/images/seed.png, compare-lfu-fifo.png, study-llama2-13b.png and zeropp-gpt-18b.png (.csv, .plot.json)"
