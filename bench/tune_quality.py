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

Usage: python3 bench/tune_quality.py [BUILD_DIR]   (default build; ~15 minutes)
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


def tune_json(scenario, args, budget, *extra):
    r, s = run(["tune", scenario, *args, "--budget", str(budget), "--json", "-j", JOBS, *extra])
    if r.returncode != 0:
        print(f"strata tune {scenario} {' '.join(extra)} failed ({r.returncode}): {r.stderr.strip()[-300:]}",
              file=sys.stderr)
        return None, s
    return json.loads(r.stdout), s


def to_within(t, target):
    """Simulations, in evaluation order, until one is within 2% of target."""
    n = 0
    for p in t["points"]:
        if p["simulated"]:
            n += 1
            if p["samples_per_s"] >= 0.98 * target:
                return n
    return None


def compare_methods(scenario, args, budget):
    """Each method at the budget, random over 5 seeds: (name, tune's JSON or None, wall)."""
    out = []
    for name, extra in [("descent", []), ("bound first", ["--method", "bound"])] + [
            (f"random, seed {seed}", ["--method", "random", "--seed", str(seed)]) for seed in range(1, 6)]:
        t, s = tune_json(scenario, args, budget, *extra)
        out.append((name, t, s))
    return out


def method_rows(title, budget, runs, target):
    """Table rows: each method's best / target and simulations to within 2% of it."""
    def of(t):
        return (t["best"]["samples_per_s"] / target, to_within(t, target)) if t else (0.0, None)
    shown = lambda n: "never" if n is None else str(n)
    (_, d, ds), (_, b, bs), randoms = runs[0], runs[1], runs[2:]
    ratios = sorted(of(t)[0] for _, t, _ in randoms)
    reach = sorted((of(t)[1] for _, t, _ in randoms), key=lambda n: 10 ** 9 if n is None else n)
    return [f"| {title} | {budget} | descent | {of(d)[0]:.4f} | {shown(of(d)[1])} | {ds:.0f} s |",
            f"| | | random, 5 seeds: median (worst) | {ratios[2]:.4f} ({ratios[0]:.4f}) | "
            f"{shown(reach[2])} ({shown(reach[4])}) | {sum(s for _, _, s in randoms) / 5:.0f} s each |",
            f"| | | bound first | {of(b)[0]:.4f} | {shown(of(b)[1])} | {bs:.0f} s |" if b else
            "| | | bound first | (refused: it plans every point, and the space has more than 20000) | | |"]


def main():
    rows, methods = [], []  # methods: table rows
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
        runs = compare_methods(scenario, ["--only", *search], budget)
        _, t, tune_s = runs[0]  # the default method's run
        if t is None:
            print(f"{title}: tune failed")
            continue
        best = t["best"]["samples_per_s"]
        defaults = [a for k in space if k in DEFAULTS for a in ("--set", f"{k}={DEFAULTS[k]}")]
        d, _ = run(["simulate", scenario, *defaults, "--json"])
        default_speed = json.loads(d.stdout)["samples_per_s"] if d.returncode == 0 else None
        rows.append((title, points, len(speeds), grid_best, grid_s, t["simulations"], best, tune_s, default_speed))
        methods += method_rows(title, budget, runs, grid_best)
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
    # The whole default space of the 13B scenario: no grid; the yardstick
    # is the best any method found.
    whole = compare_methods(os.path.join(SRC, "scenarios/studies/llama2-13b-a100.yaml"), [], 60)
    found = max(t["best"]["samples_per_s"] for _, t, _ in whole if t)
    methods += method_rows("Llama-2-13B, the whole default space (against the best found)", 60, whole, found)
    print("\n| scenario | budget | method | best / grid's best | simulations to within 2% | wall |")
    print("|---|---|---|---|---|---|")
    print("\n".join(methods))
    return 0 if rows and all(r[6] >= 0.98 * r[3] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
