#!/usr/bin/env python3
"""Regenerates the policy study: runs `strata compare` on each study point and
writes results.json, report.md (tables and per-point findings) and one SVG plot
per point. Usage (from the repository root, after scripts/build.sh):

    python3 papers/policy-study/run.py [--strata build/cli/strata] [--check]

--check (a test runs it) says whether results.json is still what this build
gives, without writing anything.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
POLICIES = ["lru", "lfu", "fifo", "belady", "cost_aware"]

# (label, scenario file, gpu_cache, cpu_cache): from tight to ample memory.
POINTS = [
    ("1.3B, tight GPU, tight CPU", "gpt-1.3b-nvme.yaml", "256MiB", "256MiB"),
    ("1.3B, tight GPU, ample CPU", "gpt-1.3b-nvme.yaml", "256MiB", "4GiB"),
    ("1.3B, ample GPU, tight CPU", "gpt-1.3b-nvme.yaml", "2GiB", "256MiB"),
    ("1.3B, ample GPU, ample CPU", "gpt-1.3b-nvme.yaml", "4GiB", "4GiB"),
    ("70B x8, tight GPU, tight CPU", "llama-70b-8gpu.yaml", "4GiB", "8GiB"),
    ("70B x8, ample GPU, ample CPU", "llama-70b-8gpu.yaml", "24GiB", "64GiB"),
]


# The simulator breaks the ranks' lockstep with a hashed jitter (docs/simulator.md
# "Symmetry breaking"); each policy runs different ops, so it draws differently.
# Every point is replayed at SEEDS jitter seeds: the median is the policy's
# time and the spread is the run-to-run variation a difference must exceed.
SEEDS = 5


def run_point(strata, scenario, gpu, cpu, seed):
    cmd = [strata, "compare", os.path.join(HERE, scenario), "--json", "--policies", ",".join(POLICIES),
           "--gpu-cache", gpu, "--cpu-cache", cpu, "--jitter-seed", str(seed)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode not in (0, 1):  # 1: some policy does not fit, still reported
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr}")
    return json.loads(out.stdout)


def merge_seeds(runs):
    """One row per policy: the plan's figures (the same at every seed: the plan
    does not depend on the jitter, checked here) and the iteration time's
    median, min and max over the seeds."""
    rows = {}
    for p in POLICIES:
        first = runs[0][p]
        for r in runs[1:]:
            for key in ("parameter_traffic_bytes", "bytes", "hit_ratio"):
                if r[p][key] != first[key]:
                    sys.exit(f"{p}: {key} differs between jitter seeds; the plan should not depend on them")
        times = sorted(r[p]["iteration_time_s"] for r in runs)
        row = dict(first)
        row["iteration_time_s"] = times[len(times) // 2]
        row["iteration_time_s_min"] = times[0]
        row["iteration_time_s_max"] = times[-1]
        row["iteration_time_s_seeds"] = [r[p]["iteration_time_s"] for r in runs]
        rows[p] = row
    return rows


def gib(b):
    return b / 2**30


def svg_bars(title, rows, path):
    """Two grouped bar charts side by side, iteration time and traffic over
    the lower bound, one bar per policy (matplotlib, python3-matplotlib; its
    SVG without a date and with fixed ids, so a redraw of the same results
    gives the same file)."""
    try:
        import matplotlib
    except ImportError:
        sys.exit(f"matplotlib not found for {sys.executable} (Debian: python3-matplotlib, "
                 "scripts/install-deps.sh --papers)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams["svg.hashsalt"] = "strata-policy-study"
    plt.rcParams["svg.fonttype"] = "none"  # text as text, not glyph paths
    colors = {"lru": "#4e79a7", "lfu": "#f28e2b", "fifo": "#e15759", "belady": "#59a14f", "cost_aware": "#b07aa1"}
    metrics = [("iteration time (s)", "iteration_time_s"), ("parameter traffic / lower bound", "traffic_over_lower_bound")]
    fig, axes = plt.subplots(1, 2, figsize=(7.6, 3.0))
    fig.suptitle(title, fontsize=11)
    for ax, (label, key) in zip(axes, metrics):
        vals = [rows[p][key] for p in POLICIES]
        bars = ax.bar(POLICIES, vals, color=[colors[p] for p in POLICIES], width=0.7)
        ax.bar_label(bars, labels=[f"{v:.3g}" for v in vals], fontsize=8)
        ax.set_title(label, fontsize=10)
        ax.set_ylim(0, max(vals) * 1.15 or 1)
        ax.tick_params(labelsize=8)
        ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)


def plots():
    """Redraws the plots from results.json (no simulation)."""
    for i, r in enumerate(json.load(open(os.path.join(HERE, "results.json")))):
        svg_bars(r["label"], r["policies"], os.path.join(HERE, f"point{i + 1}.svg"))


def findings(rows):
    t = {p: rows[p]["iteration_time_s"] for p in POLICIES}
    best = min(POLICIES, key=lambda p: (t[p], POLICIES.index(p)))
    worst = max(POLICIES, key=lambda p: t[p])
    # Tied: the seed ranges overlap the fastest's, so the difference is within
    # the run-to-run variation.
    tied = [p for p in POLICIES if rows[p]["iteration_time_s_min"] <= rows[best]["iteration_time_s_max"]]
    spread = max(100 * (rows[p]["iteration_time_s_max"] / rows[p]["iteration_time_s_min"] - 1) for p in POLICIES)
    lines = []
    if len(tied) == len(POLICIES):
        lines.append(f"all policies tie on iteration time (median {t[best]:.4g} to {t[worst]:.4g} s; "
                     f"their seed ranges overlap the fastest's, each spanning at most {spread:.2f}%)")
    else:
        lines.append(f"fastest: {', '.join(tied)} ({t[best]:.4g} s; tied where the seed ranges overlap), "
                     f"{100 * (t[worst] / t[best] - 1):.1f}% faster than the slowest ({worst}, {t[worst]:.4g} s); "
                     f"vs LRU: {100 * (t['lru'] / t[best] - 1):+.1f}%; each policy's seed range spans at most {spread:.2f}%")
    traffic = {p: rows[p]["traffic_over_lower_bound"] for p in POLICIES}
    least = min(POLICIES, key=lambda p: (traffic[p], POLICIES.index(p)))
    lines.append(f"least parameter traffic: {least} ({traffic[least]:.3f}x the compulsory bytes; LRU {traffic['lru']:.3f}x)")
    return lines


def check(strata):
    """Whether results.json is what this build gives: every point replayed
    at jitter seed 0, its plan figures equal and its time within 1e-4 of
    the recorded seed-0 time (the replay is deterministic; the slack is for
    another compiler's floating point). Prints each difference; True when
    there is none. A change to the planner or the simulator that moves the
    study fails this until run.py regenerates it."""
    recorded = json.load(open(os.path.join(HERE, "results.json")))
    if [(r["label"], r["scenario"], r["gpu_cache"], r["cpu_cache"]) for r in recorded] != [tuple(p) for p in POINTS]:
        print("results.json holds other points than run.py's POINTS")
        return False
    ok = True
    for r in recorded:
        got = run_point(strata, r["scenario"], r["gpu_cache"], r["cpu_cache"], 0)
        for p in POLICIES:
            want, have = r["policies"][p], got[p]
            for key in ("parameter_traffic_bytes", "bytes", "hit_ratio", "peak_bytes", "feasible"):
                if want[key] != have[key]:
                    print(f"{r['label']}, {p}: {key} is {have[key]}, results.json has {want[key]}")
                    ok = False
            t0 = want["iteration_time_s_seeds"][0]
            if abs(have["iteration_time_s"] - t0) > 1e-4 * t0:
                print(f"{r['label']}, {p}: iteration {have['iteration_time_s']:.6g} s at seed 0, results.json has {t0:.6g} s")
                ok = False
    print("results.json is this build's" if ok else "stale: rerun python3 papers/policy-study/run.py and update README.md")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--strata", default=os.path.join(HERE, "..", "..", "build", "cli", "strata"))
    ap.add_argument("--check", action="store_true", help="compare results.json with this build instead of writing it")
    ap.add_argument("--plots", action="store_true", help="redraw the plots from results.json (needs python3-matplotlib)")
    args = ap.parse_args()
    if args.check:
        sys.exit(0 if check(args.strata) else 1)
    if args.plots:
        plots()
        return
    results = []
    for label, scenario, gpu, cpu in POINTS:
        print(f"== {label}", flush=True)
        runs = [run_point(args.strata, scenario, gpu, cpu, seed) for seed in range(SEEDS)]
        results.append({"label": label, "scenario": scenario, "gpu_cache": gpu, "cpu_cache": cpu,
                        "jitter_seeds": SEEDS, "policies": merge_seeds(runs)})
    with open(os.path.join(HERE, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    md = ["# Policy study: results", "",
          "Generated by `python3 papers/policy-study/run.py`; see README.md for the discussion.",
          f"Iteration times are the median over {SEEDS} jitter seeds (`--jitter-seed 0..{SEEDS - 1}`, the default jitter "
          "1e-3), with the range beside it; the other columns come from the plan and do not depend on the seed.", ""]
    for i, r in enumerate(results):
        rows = r["policies"]
        md += [f"## {r['label']}", "",
               f"`{r['scenario']}` with `policy.gpu_cache` {r['gpu_cache']} and `policy.cpu_cache` {r['cpu_cache']}.", "",
               "| policy | iteration (s) | range (s) | H2D (GiB) | NVMe read (GiB) | GPU hit | CPU hit | traffic / lower bound | peak GPU (GiB) | peak CPU (GiB) | fits |",
               "|---|---|---|---|---|---|---|---|---|---|---|"]
        for p in POLICIES:
            x = rows[p]
            md.append(f"| {p} | {x['iteration_time_s']:.4f} | {x['iteration_time_s_min']:.4f}-{x['iteration_time_s_max']:.4f} | {gib(x['bytes']['h2d']):.2f} | {gib(x['bytes']['nvme_read']):.2f} "
                      f"| {100 * x['hit_ratio']['gpu']:.1f}% | {100 * x['hit_ratio']['cpu']:.1f}% "
                      f"| {x['traffic_over_lower_bound']:.3f} | {gib(x['peak_bytes']['gpu']):.2f} "
                      f"| {gib(x['peak_bytes']['cpu']):.2f} | {'yes' if x['feasible'] else 'no'} |")
        svg = f"point{i + 1}.svg"
        svg_bars(r["label"], rows, os.path.join(HERE, svg))
        md += ["", *[f"- {line}" for line in findings(rows)], "", f"![{r['label']}]({svg})", ""]
    with open(os.path.join(HERE, "report.md"), "w") as f:
        f.write("\n".join(md))
    print("wrote results.json, report.md and", len(results), "plots")


if __name__ == "__main__":
    main()
