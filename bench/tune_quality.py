#!/usr/bin/env python3
"""strata tune against an exhaustive grid (docs/tune.md, "Quality").

For each scenario: `strata sweep` simulates every point of a grid of at
least 500; `strata tune --only` searches the same keys with a budget of a
tenth of the grid's points. Prints both bests, their ratio (the target:
within 2%), the simulations and wall time of each, and the tuned point
against DeepSpeed's default values of the same keys. Then the methods
compared at the same budget: the default (coordinate descent with random
restarts), random points (five seeds: the median and the worst), and the
resource bound as a cheap proxy (every point planned, simulated least
bound first).

Usage: python3 bench/tune_quality.py [BUILD_DIR]   (default build; ~12 minutes)
"""
import itertools
import json
import os
import subprocess
import sys
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(SRC, "build")
STRATA = os.path.join(BUILD, "cli", "strata")
JOBS = "2"

# DeepSpeed's defaults for the keys searched (runtime/zero/config.py,
# offload_config.py, runtime/swap_tensor/aio_config.py).
DEFAULTS = {
    "zero_optimization.offload_param.buffer_count": "5",
    "zero_optimization.stage3_prefetch_bucket_size": "50000000",
    "zero_optimization.stage3_max_live_parameters": "1000000000",
    "zero_optimization.stage3_max_reuse_distance": "1000000000",
    "zero_optimization.stage3_param_persistence_threshold": "100000",
    "zero_optimization.sub_group_size": "1000000000",
    "aio.queue_depth": "8",
    "aio.block_size": "1048576",
}

CASES = [
    ("Llama-2-13B, one A100, NVMe", os.path.join(SRC, "scenarios/studies/llama2-13b-a100.yaml"), {
        "zero_optimization.offload_param.buffer_count": ["4", "5", "8", "16", "32"],
        "zero_optimization.stage3_prefetch_bucket_size": ["10000000", "50000000", "200000000", "500000000"],
        "aio.queue_depth": ["4", "8", "16", "32"],
        "aio.block_size": ["262144", "1048576", "4194304"],
        "zero_optimization.stage3_max_live_parameters": ["100000000", "1000000000", "3000000000"],
    }),
    ("GPT-2 1.5B, V100s", "builtin:gpt2-1.5b-v100", {
        "zero_optimization.stage": ["0", "1", "2", "3"],
        "zero_optimization.offload_optimizer.device": ["none", "cpu"],
        "zero_optimization.stage3_prefetch_bucket_size": ["10000000", "50000000", "200000000", "500000000"],
        "zero_optimization.stage3_max_live_parameters": ["100000000", "1000000000", "3000000000"],
        "zero_optimization.stage3_param_persistence_threshold": ["10000", "100000", "1000000"],
        "training.activation_checkpointing": ["false", "true"],
    }),
    ("Llama-70B, 8 A100s, NVMe", "builtin:llama-70b-8xa100", {
        "zero_optimization.offload_param.buffer_count": ["4", "5", "8", "16", "32"],
        "zero_optimization.stage3_prefetch_bucket_size": ["10000000", "50000000", "200000000", "500000000"],
        "aio.queue_depth": ["4", "8", "16", "32"],
        "zero_optimization.sub_group_size": ["100000000", "1000000000", "2000000000"],
        "zero_optimization.stage3_max_reuse_distance": ["100000000", "1000000000", "3000000000"],
    }),
]


def run(args):
    t0 = time.monotonic()
    r = subprocess.run([STRATA, *args], capture_output=True, text=True)
    return r, time.monotonic() - t0


def tune_best(scenario, search, budget, *extra):
    r, s = run(["tune", scenario, "--only", *search, "--budget", str(budget), "--json", "-j", JOBS, *extra])
    if r.returncode != 0:
        return 0.0, s
    return json.loads(r.stdout)["best"]["samples_per_s"], s


def compare_methods(scenario, search, budget, grid_best):
    randoms = [tune_best(scenario, search, budget, "--method", "random", "--seed", str(seed)) for seed in range(1, 6)]
    ratios = sorted(b / grid_best for b, _ in randoms)
    bound, bound_s = tune_best(scenario, search, budget, "--method", "bound")
    return ratios[len(ratios) // 2], ratios[0], sum(s for _, s in randoms) / len(randoms), bound / grid_best, bound_s


def main():
    rows, methods = [], []
    for title, scenario, space in CASES:
        points = 1
        for values in space.values():
            points *= len(values)
        sets = [a for k, v in space.items() for a in ("--set", f"{k}={','.join(v)}")]
        grid, grid_s = run(["sweep", scenario, *sets, "--json", "-j", JOBS])
        rows_json = json.loads(grid.stdout)
        speeds = [r["samples_per_s"] for r in rows_json if r.get("feasible") and r.get("samples_per_s")]
        grid_best = max(speeds) if speeds else 0
        budget = points // 10
        search = [a for k, v in space.items() for a in ("--search", f"{k}={','.join(v)}")]
        tuned, tune_s = run(["tune", scenario, "--only", *search, "--budget", str(budget), "--json", "-j", JOBS])
        if tuned.returncode != 0:
            print(f"{title}: tune failed: {tuned.stderr.strip()[-300:]}")
            continue
        t = json.loads(tuned.stdout)
        best = t["best"]["samples_per_s"]
        defaults = [a for k in space if k in DEFAULTS for a in ("--set", f"{k}={DEFAULTS[k]}")]
        d, _ = run(["simulate", scenario, *defaults, "--json"])
        default_speed = json.loads(d.stdout)["samples_per_s"] if d.returncode == 0 else None
        rows.append((title, points, len(speeds), grid_best, grid_s, t["simulations"], best, tune_s, default_speed))
        methods.append((title, budget, best / grid_best, tune_s, *compare_methods(scenario, search, budget, grid_best)))
        print(f"{title}: grid {points} points ({len(speeds)} run), best {grid_best:.5g} samples/s in {grid_s:.0f} s; "
              f"tune {t['simulations']} simulations, best {best:.5g} ({best / grid_best:.4f} of the grid's) "
              f"in {tune_s:.0f} s; DeepSpeed's defaults "
              + (f"{default_speed:.5g} samples/s, tuned {best / default_speed:.3f}x" if default_speed else "do not run"),
              flush=True)
    print("\n| scenario | grid points (run) | grid best, samples/s | grid wall | tune simulations | tune best | "
          "tune / grid | tune wall | DeepSpeed defaults | tuned / defaults |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for title, points, ran, gb, gs, sims, best, ts, ds in rows:
        print(f"| {title} | {points} ({ran}) | {gb:.4g} | {gs:.0f} s | {sims} | {best:.4g} | {best / gb:.4f} | "
              f"{ts:.0f} s | " + (f"{ds:.4g} | {best / ds:.3f}x |" if ds else "do not run | |"))
    print("\n| scenario | budget | descent: best / grid | wall | random, 5 seeds: median | worst | wall (mean) | "
          "bound first: best / grid | wall |")
    print("|---|---|---|---|---|---|---|---|---|")
    for title, budget, d, ds, rm, rw, rs, b, bs in methods:
        print(f"| {title} | {budget} | {d:.4f} | {ds:.0f} s | {rm:.4f} | {rw:.4f} | {rs:.0f} s | {b:.4f} | {bs:.0f} s |")
    return 0 if rows and all(r[6] >= 0.98 * r[3] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
