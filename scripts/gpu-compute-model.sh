#!/usr/bin/env bash
# The simulator's compute model against the GPU at hand (docs/simulator.md,
# "Checked against a GPU"): for GPT layers of hidden 4096, 8192 and 25600
# (the ZeRO-Infinity 10B, 50B/100B and 1T rows' shapes; sequence 1024,
# micro batch 5), the forward and backward of one layer measured by
# scripts/gpu-layer-time.py (PyTorch, Megatron's fused kernels) beside the
# same layer's ops in `strata simulate --csv` of a one-GPU scenario with the
# GPU's preset, and their ratio, with flash and with unfused attention, and
# for Megatron-LM v1.1.5 as the ZeRO-Infinity artifact runs it (fp16, every
# op eager: the model with training.precision fp16 and the three
# model.*_fusion false).
# It asserts nothing: it prints figures.
# Usage: scripts/gpu-compute-model.sh [BUILD_DIR] [PRESET]
#   BUILD_DIR: default build/; PRESET: a gpu.model (default: from
#   nvidia-smi's name: h100-80gb, h200, a100-80gb, a100-40gb, v100-32gb).
# Exit 0 when it ran, 1 on a failure, 2 without a GPU or PyTorch.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
[ -n "$name" ] || { echo "gpu-compute-model: no GPU here (nvidia-smi lists none)" >&2; exit 2; }
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null ||
  { echo "gpu-compute-model: needs PyTorch with CUDA (python3 -c 'import torch')" >&2; exit 2; }
preset=${2:-}
if [ -z "$preset" ]; then
  case "$name" in
    *H200*) preset=h200 ;;
    *H100*) preset=h100-80gb ;;
    *A100*80GB*) preset=a100-80gb ;;
    *A100*) preset=a100-40gb ;;
    *V100*) preset=v100-32gb ;;
    *) echo "gpu-compute-model: no preset for '$name': give one" >&2; exit 2 ;;
  esac
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/layer.yaml" <<EOF
name: compute-model-check
model: {kind: transformer, layers: 2, hidden_size: 4096, num_heads: 32, vocab_size: 50304, seq_length: 1024}
hardware:
  nodes: 1
  gpus_per_node: 1
  gpu: {model: $preset}
  cpu: {memory: 1TiB, memory_bandwidth: 200GB/s, cores: 64}
  pcie: {bandwidth: 25GB/s}
  network: {bandwidth: 25GB/s}
  nvme: {capacity: 4TB, read_bandwidth: 6GB/s, write_bandwidth: 3GB/s}
training: {micro_batch_size: 5, gradient_accumulation_steps: 1, precision: bf16, activation_checkpointing: false}
zero_optimization: {stage: 0}
EOF
# strata's layer0 forward and backward, in ms: "FWD BWD". A plan that does
# not fit (exit 1, "DOES NOT FIT") still times its ops, which is all this uses.
model() {  # model HIDDEN HEADS FLASH [--set ...]
  local hidden=$1 heads=$2 flash=$3
  shift 3
  "$build/cli/strata" simulate "$work/layer.yaml" --set model.hidden_size="$hidden" --set model.num_heads="$heads" \
    --set model.flash_attention="$flash" "$@" --csv "$work/ops.csv" >/dev/null 2>&1 || true
  awk -F, 'NR > 1 && $3 ~ /\.layer0\./ { t = ($8 - $7) * 1e3; if ($4 == "forward") f += t; else b += t }
           END { printf "%.3f %.3f\n", f, b }' "$work/ops.csv"
}
echo "GPU: $name; preset $preset; strata $build/cli/strata"
printf "%-14s %-8s %-22s %-22s %s\n" "hidden/heads" "attn" "measured fwd + bwd" "strata fwd + bwd" "strata/measured"
for shape in "4096 32" "8192 64" "25600 160"; do
  set -- $shape
  if ! python3 "$here/scripts/gpu-layer-time.py" "$1" "$2" 1024 5 >"$work/meas" 2>"$work/err"; then
    echo "$1/$2: the measurement failed (GPU memory?): $(tail -1 "$work/err")"
    continue
  fi
  for kind in unfused flash v1.1.5; do
    case $kind in
      v1.1.5) line=$(grep -F "Megatron v1.1.5 fp16" "$work/meas" || true)
              set_v115=(--set training.precision=fp16 --set model.masked_softmax_fusion=false
                        --set model.bias_gelu_fusion=false --set model.bias_dropout_fusion=false) ;;
      *) line=$(grep -F "Megatron's, $kind attn" "$work/meas" || true); set_v115=() ;;
    esac
    if [ -z "$line" ]; then echo "$1/$2 $kind: no measurement in gpu-layer-time.py's output"; continue; fi
    mf=$(echo "$line" | sed -E 's/.*forward ([0-9.]+) ms.*/\1/')
    mb=$(echo "$line" | sed -E 's/.*backward ([0-9.]+) ms.*/\1/')
    read -r sf sb < <(model "$1" "$2" "$([ $kind = flash ] && echo true || echo false)" ${set_v115[@]+"${set_v115[@]}"})
    python3 -c "import sys; mf, mb, sf, sb = map(float, sys.argv[1:5]); print('%-14s %-8s %-22s %-22s %.2f' % (sys.argv[5], sys.argv[6], '%.2f + %.2f ms' % (mf, mb), '%.2f + %.2f ms' % (sf, sb), (sf + sb) / (mf + mb)))" \
      "$mf" "$mb" "$sf" "$sb" "$1/$2" "$kind"
  done
done
