#!/usr/bin/env bash
# Reproduces the ZeRO-Infinity paper's Fig. 5c (one DGX-2) with Strata's
# simulator: one scenario per row (fig5c-*.yaml, all on `hardware.preset:
# dgx2`). Prints two Markdown tables: the paper's TFLOPS per GPU beside
# Strata's with the relative error, and how each row moves under the
# settings the paper does not pin down (sensitivity, not a fit). Writes
# results.json (every simulation's JSON report).
# Usage: papers/zero-infinity/run.sh [--quick] [path/to/strata]
#   (default build/cli/strata; --quick: the first table only, results.json untouched)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
quick=0
if [ "${1:-}" = --quick ]; then quick=1; shift; fi
strata="${1:-$root/build/cli/strata}"
[ -x "$strata" ] || { echo "no strata binary at $strata (build first: scripts/build.sh)" >&2; exit 2; }
exec python3 - "$strata" "$here" "$quick" <<'PY'
import json, subprocess, sys
strata, here, quick = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
rows = [("10b", "10B", 45), ("50b", "50B", 44), ("100b", "100B", 41), ("500b", "0.5T", 33), ("1t", "1T", 27)]

def simulate(f, sets=()):
    cmd = [strata, "simulate", f"{here}/fig5c-{f}.yaml", "--json"]
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.run(cmd, capture_output=True, text=True)
    # Exit 1 is a plan that does not fit: its JSON report still comes.
    if p.returncode not in (0, 1) or not p.stdout.strip():
        sys.exit(f"{' '.join(cmd)} failed (exit {p.returncode}): {p.stderr.strip()}")
    return json.loads(p.stdout)

def hfu(j):
    return f"{j['hardware_tflops_per_gpu']:.1f}" if j["feasible"] else "does not fit"

results = []
print("| model | paper TFLOPS/GPU | Strata TFLOPS/GPU (counting recomputation) | error | Strata, model FLOPs | MFU | iteration | bottleneck |")
print("|---|---|---|---|---|---|---|---|")
for f, label, paper in rows:
    j = simulate(f)
    results.append({"row": label, "paper_tflops": paper, "settings": [], "strata": j})
    if not j["feasible"]:
        print(f"| {label} | {paper} | does not fit | | | | | {j['violations'][0]['message']} |")
        continue
    hw = j["hardware_tflops_per_gpu"]
    print(f"| {label} | {paper} | {hw:.1f} | {100 * (hw - paper) / paper:+.0f}% | {j['tflops_per_gpu']:.1f} | "
          f"{100 * j['mfu']:.1f}% | {j['iteration_time_s']:.1f} s | {j['bottleneck']} |")

if quick:
    sys.exit(0)
variants = [
    ("current DeepSpeed's gradient path", ["policy.offload_gradients=cpu_buffer"]),
    ("pipeline_read and pipeline_write (buffer_count 12)",
     ["zero_optimization.offload_optimizer.pipeline_read=true", "zero_optimization.offload_optimizer.pipeline_write=true",
      "zero_optimization.offload_optimizer.buffer_count=12"]),
    ("micro batch 10", ["training.micro_batch_size=10"]),
    ("4 micro batches of 5 per step", ["training.gradient_accumulation_steps=4"]),
]
print()
print("| model | paper | as configured | " + " | ".join(v[0] for v in variants) + " |")
print("|---|---|---|" + "---|" * len(variants))
for f, label, paper in rows:
    cells = [hfu(results[[r[0] for r in rows].index(f)]["strata"])]
    for name, sets in variants:
        j = simulate(f, sets)
        results.append({"row": label, "paper_tflops": paper, "settings": sets, "strata": j})
        cells.append(hfu(j))
    print(f"| {label} | {paper} | " + " | ".join(cells) + " |")
json.dump(results, open(f"{here}/results.json", "w"), indent=1)
PY
