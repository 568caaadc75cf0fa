#!/usr/bin/env python3
"""Regenerates the simulator-versus-reality study: calibrates this machine
once (`strata calibrate`), then `strata validate`s six scenarios that stress
different bottlenecks with the calibrated hardware, and writes results.json,
report.md and plot.svg (matplotlib: scripts/install-deps.sh --papers).
Usage (from the repository root, after scripts/build.sh):

    python3 papers/sim-vs-real/run.py [--strata build/cli/strata]
    python3 papers/sim-vs-real/run.py --plot   # only redraw plot.svg from results.json
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

POINTS = [
    # (label, stress, scenario, extra args, MPI ranks)
    ("gpt-tiny in device memory", "compute", "builtin:gpt-tiny",
     ["--set", "zero_optimization.stage=0", "--set", "zero_optimization.offload_param.device=none",
      "--set", "zero_optimization.offload_optimizer.device=none"], 1),
    ("seed MLP, ZeRO-Infinity", "NVMe", "builtin:seed", [], 1),
    ("MLP 2048x3 on CPU", "CPU optimizer", os.path.join(HERE, "mlp-copy.yaml"), [], 1),
    ("MLP 2048x5, pageable parameters", "copies", os.path.join(HERE, "mlp-pageable.yaml"), [], 1),
    ("MLP 2048x5, stage 2, pageable CPU gradients", "pageable staging",
     os.path.join(HERE, "mlp-stage2-pageable.yaml"), [], 1),
    ("seed MLP, 2 MPI ranks", "collectives", "builtin:seed",
     ["--set", "zero_optimization.offload_param.device=none", "--set", "zero_optimization.offload_optimizer.device=cpu"], 2),
]


def sh(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr}")
    return out.stdout


def plot(results):
    """plot.svg: measured and simulated iteration per scenario (matplotlib,
    python3-matplotlib; no date and fixed ids, so a redraw of the same
    results gives the same file)."""
    try:
        import matplotlib
    except ImportError:
        sys.exit(f"matplotlib not found for {sys.executable} (Debian: python3-matplotlib, "
                 "scripts/install-deps.sh --papers)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams["svg.hashsalt"] = "strata-sim-vs-real"
    plt.rcParams["svg.fonttype"] = "none"  # text as text, not glyph paths
    fig, ax = plt.subplots(figsize=(9.6, 3.6))
    xs = range(len(results))
    for k, (key, color, name) in enumerate((("measured_s", "#2f4b7c", "measured"),
                                            ("simulated_s", "#8cb3e0", "simulated"))):
        vals = [r["validate"]["iteration"][key] * 1e3 for r in results]
        bars = ax.bar([x + (k - 0.5) * 0.35 for x in xs], vals, width=0.35, color=color, label=name)
        ax.bar_label(bars, labels=[f"{v:.1f}" for v in vals], fontsize=8)
    labels = [r["label"].replace(", ", "\n") + f"\n{100 * r['validate']['iteration']['relative_error']:+.0f}%"
              for r in results]
    ax.set_xticks(list(xs), labels, fontsize=8)
    ax.set_ylabel("iteration time (ms)")
    ax.set_title("iteration time: measured vs simulated", fontsize=11)
    ax.legend(frameon=False, fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    fig.savefig(os.path.join(HERE, "plot.svg"), format="svg", metadata={"Date": None})
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--strata", default=os.path.join(HERE, "..", "..", "build", "cli", "strata"))
    ap.add_argument("--work", default="/tmp/strata-sim-vs-real")
    ap.add_argument("--rounds", type=int, default=7, help="calibrate+validate rounds per scenario (median reported)")
    ap.add_argument("--plot", action="store_true", help="only redraw plot.svg from results.json")
    args = ap.parse_args()
    if args.plot:
        plot(json.load(open(os.path.join(HERE, "results.json")))["points"])
        return
    os.makedirs(args.work, exist_ok=True)
    env_mpi = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]
    nvme = ["--nvme-dir", os.path.join(args.work, "nvme")]
    results = []
    hardware = {}
    for i, (label, stress, scenario, extra, ranks) in enumerate(POINTS):
        print(f"== {label}", flush=True)
        mpi = env_mpi if ranks > 1 else []
        # Rounds of calibrate-then-validate: this machine's disk and CPU
        # vary by tens of percent from minute to minute, so one round is one
        # sample; the round with the median iteration error is reported,
        # the range beside it.
        rounds = []
        for k in range(args.rounds):
            hw = os.path.join(args.work, f"hardware{i}.{k}.yaml")
            sh(mpi + [args.strata, "calibrate", scenario, "-o", hw] + nvme + extra)
            # The study reports the error; it does not gate on it (--tolerance).
            cmd = [args.strata, "validate", scenario, "--hardware", hw, "--json", "--steps", "9",
                   "--tolerance", "1e9"] + nvme + extra
            rounds.append({"hardware": open(hw).read(), "validate": json.loads(sh(mpi + cmd))})
        errors = [r["validate"]["iteration"]["relative_error"] for r in rounds]
        median = sorted(range(len(rounds)), key=lambda k: errors[k])[len(rounds) // 2]
        named = [r["validate"]["bottleneck"] for r in rounds]
        results.append({"label": label, "stress": stress, "ranks": ranks, "hardware": rounds[median]["hardware"],
                        "validate": rounds[median]["validate"], "round_errors": errors,
                        "rounds_same_bottleneck": sum(b["measured"] == b["simulated"] for b in named),
                        "round_bottlenecks": named})
    with open(os.path.join(HERE, "results.json"), "w") as f:
        json.dump({"points": results}, f, indent=1)
    md = ["# Simulator versus reality: results", "",
          "Generated by `python3 papers/sim-vs-real/run.py`; see README.md for the discussion.", "",
          "| scenario | stresses | measured (s) | simulated (s) | error (median round) | error range over rounds | bottleneck measured | bottleneck simulated | rounds naming the same |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        v = r["validate"]
        it = v["iteration"]
        lo, hi = min(r["round_errors"]), max(r["round_errors"])
        md.append(f"| {r['label']} | {r['stress']} | {it['measured_s']:.4f} | {it['simulated_s']:.4f} | "
                  f"{100 * it['relative_error']:+.1f}% | {100 * lo:+.0f}% .. {100 * hi:+.0f}% | "
                  f"{v['bottleneck']['measured']} | {v['bottleneck']['simulated']} | "
                  f"{r['rounds_same_bottleneck']} of {len(r['round_errors'])} |")
    md.append("")
    for r in results:
        md += [f"## {r['label']}", "",
               "Busy time per class, and time on the critical path (the chain of ops that set the iteration's length):", "",
               "| class | measured (s) | simulated (s) | error | on the path, measured / simulated (s) |",
               "|---|---|---|---|---|"]
        path = r["validate"].get("critical_path", {})
        for c, x in r["validate"]["classes"].items():
            p = path.get(c, {})
            on = f"{p['measured_s']:.5f} / {p['simulated_s']:.5f}" if p else ""
            md.append(f"| {c} | {x['measured_s']:.5f} | {x['simulated_s']:.5f} | {100 * x['relative_error']:+.1f}% | {on} |")
        if "wait" in path:
            md.append(f"| wait | | | | {path['wait']['measured_s']:.5f} / {path['wait']['simulated_s']:.5f} |")
        md += ["", "Calibrated hardware (`strata calibrate` for this scenario):", "", "```yaml",
               r["hardware"].rstrip(), "```", ""]
    md.append("![iteration time, measured and simulated](plot.svg)")
    with open(os.path.join(HERE, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    plot(results)
    print("wrote results.json, report.md and plot.svg")


if __name__ == "__main__":
    main()
