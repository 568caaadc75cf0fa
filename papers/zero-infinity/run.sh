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
rows_5a = [("500b", "0.5T", 46, 4), ("1t", "1T", 49, 4), ("5t", "5T", 44, 4), ("10t", "10T", 43, 4), ("20t", "20T", 34, 8)]

def simulate(f, sets=(), fig="5c"):
    cmd = [strata, "simulate", f"{here}/fig{fig}-{f}.yaml", "--json"]
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
def table(rows, fig):
    for f, label, paper, *mp in rows:
        j = simulate(f, fig=fig)
        results.append({"figure": fig, "row": label, "paper_tflops": paper, "settings": [], "strata": j})
        lead = f"| {label} | {mp[0]} " if mp else f"| {label} "
        if not j["feasible"]:
            print(f"{lead}| {paper} | does not fit | | | | | {j['violations'][0]['message']} |")
            continue
        hw = j["hardware_tflops_per_gpu"]
        print(f"{lead}| {paper} | {hw:.1f} | {100 * (hw - paper) / paper:+.0f}% | {j['tflops_per_gpu']:.1f} | "
              f"{100 * j['mfu']:.1f}% | {j['iteration_time_s']:.1f} s | {j['bottleneck']} |")

print("Fig. 5c, one DGX-2 (16 GPUs):")
print()
print("| model | paper TFLOPS/GPU | Strata TFLOPS/GPU (counting recomputation) | error | Strata, model FLOPs | MFU | iteration | bottleneck |")
print("|---|---|---|---|---|---|---|---|")
table(rows, "5c")
print()
print("Fig. 5a, 32 DGX-2 (512 GPUs), model (tensor) parallel as given:")
print()
print("| model | model parallel | paper TFLOPS/GPU | Strata TFLOPS/GPU (counting recomputation) | error | Strata, model FLOPs | MFU | iteration | bottleneck |")
print("|---|---|---|---|---|---|---|---|---|")
table(rows_5a, "5a")

if quick:
    sys.exit(0)
variants = [
    ("current DeepSpeed's stage-3 buffers", ["policy.deepspeed_stage3=current"]),
    ("pipeline_read and pipeline_write (buffer_count 12)",
     ["zero_optimization.offload_optimizer.pipeline_read=true", "zero_optimization.offload_optimizer.pipeline_write=true",
      "zero_optimization.offload_optimizer.buffer_count=12"]),
    ("micro batch 10", ["training.micro_batch_size=10"]),
    ("4 micro batches of 5 per step", ["training.gradient_accumulation_steps=4"]),
]
print()
print("Fig. 5c rows under the settings the paper does not pin down (TFLOPS/GPU counting recomputation):")
print()
print("| model | paper | as configured | " + " | ".join(v[0] for v in variants) + " |")
print("|---|---|---|" + "---|" * len(variants))
for f, label, paper in rows:
    cells = [hfu(results[[r[0] for r in rows].index(f)]["strata"])]
    for name, sets in variants:
        j = simulate(f, sets)
        results.append({"figure": "5c", "row": label, "paper_tflops": paper, "settings": sets, "strata": j})
        cells.append(hfu(j))
    print(f"| {label} | {paper} | " + " | ".join(cells) + " |")
json.dump(results, open(f"{here}/results.json", "w"), indent=1)
PY
