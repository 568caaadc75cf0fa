#!/usr/bin/env python3
"""strata tune, executed: the tuned config against DeepSpeed's defaults, run for real.

On the host backend (docs/tune.md, "Executed"): `strata calibrate` measures
bench/tune-host.yaml's hardware here; `strata tune` searches it with that
hardware, the offload devices held (parameters and optimizer states on
NVMe, as the scenario has them); then `strata run` of the tuned scenario
and of the scenario as given (DeepSpeed's defaults for every other knob)
alternate, round by round. Prints each round's median step time of both,
the per-round ratio (min/median/max), and the tuned point's simulated
iteration against its measured one: the error to compare with the
sim-vs-real study (papers/sim-vs-real).

Usage: python3 bench/tune_host.py [BUILD_DIR] [ROUNDS]   (default build, 5; ~4 minutes)
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(SRC, "build")
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
STRATA = os.path.join(BUILD, "cli", "strata")
SCENARIO = os.path.join(SRC, "bench", "tune-host.yaml")
STEPS = 5
HOLD = ["--fix", "zero_optimization.stage=3", "--fix", "zero_optimization.offload_param.device=nvme",
        "--fix", "zero_optimization.offload_optimizer.device=nvme"]


def strata(*args):
    r = subprocess.run([STRATA, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"strata {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()[-800:]}")
    return r.stdout


def step_time(scenario, out):
    """The median step of one run, the first (warm-up) left out."""
    strata("run", scenario, "--steps", str(STEPS), "--json", "-o", out)
    return statistics.median(json.load(open(out))["step_time_s"][1:])


def main():
    tmp = tempfile.mkdtemp(prefix="strata-tune-host.")
    hw = os.path.join(tmp, "hw.yaml")
    strata("calibrate", SCENARIO, "-o", hw)
    tuned_dir = os.path.join(tmp, "tuned")
    tune = json.loads(strata("tune", SCENARIO, "--hardware", hw, *HOLD, "--budget", "80", "--json", "-o", tuned_dir))
    tuned = os.path.join(tuned_dir, "scenario.yaml")
    changed = {k: v for k, v in tune["best"]["settings"].items() if tune["start"]["settings"].get(k) != v}
    print(f"calibrated: {hw}\ntuned ({tune['simulations']} simulations): {changed}")
    print(f"simulated: defaults {tune['start']['iteration_time_s']:.4g} s, tuned {tune['best']['iteration_time_s']:.4g} s, "
          f"{tune['start']['iteration_time_s'] / tune['best']['iteration_time_s']:.3f}x")
    defaults, tuned_s, ratios = [], [], []
    for i in range(ROUNDS):
        order = [("defaults", SCENARIO), ("tuned", tuned)] if i % 2 == 0 else [("tuned", tuned), ("defaults", SCENARIO)]
        t = {name: step_time(s, os.path.join(tmp, f"{name}.{i}.json")) for name, s in order}
        defaults.append(t["defaults"])
        tuned_s.append(t["tuned"])
        ratios.append(t["defaults"] / t["tuned"])
        print(f"round {i + 1}: defaults {t['defaults']:.4g} s, tuned {t['tuned']:.4g} s, tuned {ratios[-1]:.3f}x faster",
              flush=True)

    def mmm(v, f="{:.4g}"):
        return "/".join(f.format(x) for x in (min(v), statistics.median(v), max(v)))

    print(f"\nmeasured step, min/median/max over {ROUNDS} rounds: defaults {mmm(defaults)} s, tuned {mmm(tuned_s)} s")
    print(f"tuned over defaults, per round: {mmm(ratios, '{:.3f}')}x")
    sim = json.loads(strata("simulate", tuned, "--json"))["iteration_time_s"]
    measured = statistics.median(tuned_s)
    print(f"tuned point: simulated {sim:.4g} s, measured {measured:.4g} s, error {100 * (sim - measured) / measured:+.1f}% "
          f"(papers/sim-vs-real: -9% .. +37% over its points and rounds)")
    start = tune["start"]["iteration_time_s"]
    print(f"defaults: simulated {start:.4g} s, measured {statistics.median(defaults):.4g} s, error "
          f"{100 * (start - statistics.median(defaults)) / statistics.median(defaults):+.1f}%")
    return 0 if min(ratios) > 1 else 1


if __name__ == "__main__":
    sys.exit(main())
