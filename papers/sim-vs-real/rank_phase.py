#!/usr/bin/env python3
"""Do two ranks stay in step through DeepSpeed's NVMe optimizer step?

Runs `rank-phase.yaml` (two ranks, optimizer states on NVMe, serial
swapping, 25 sub-groups) for real under `mpirun -np 2 strata run` and in
the simulator at several jitter amounts, and prints, for the optimizer
step of each:

- how much of each rank's NVMe reads ran beside the other rank's reads
  (in step) and beside its writes (out of step), the two ranks' mean;
- the median offset between the two ranks' reads of the same sub-group, as a
  fraction of a sub-group's period (0: in step; 0.5: half a period apart);
- for the real runs, how much one op's duration varies from run to run (the
  median over the step's ops of the coefficient of variation over rounds):
  the noise that the simulator's jitter stands for.

Usage (from the repository root, after scripts/build.sh; about 30 s):

    python3 papers/sim-vs-real/rank_phase.py [--rounds 5] [--strata build/cli/strata]

docs/simulator.md ("Symmetry breaking") gives what it printed.
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIO = os.path.join(HERE, "rank-phase.yaml")
JITTERS = ["0", "0.001", "0.01", "0.1", "0.45"]


def sh(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr[-2000:]}")
    return out.stdout


def union(iv):
    out = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def overlap(xs, ys):
    t, i, j = 0.0, 0, 0
    while i < len(xs) and j < len(ys):
        a, b = max(xs[i][0], ys[j][0]), min(xs[i][1], ys[j][1])
        t += max(0.0, b - a)
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return t


def step_spans(path):
    """{(rank, name): (stream, start, end)} of the optimizer step's ops."""
    spans = {}
    for row in csv.DictReader(open(path)):
        if row["name"].startswith("step."):
            spans[(row["rank"], row["name"])] = (row["stream"], float(row["start_s"]), float(row["end_s"]))
    if not any(r == "1" for r, _ in spans):
        sys.exit(f"{path}: no spans of rank 1 (a timeline of one rank)")
    return spans


def phase(spans):
    def iv(rank, stream):
        return union([(a, b) for (r, _), (s, a, b) in spans.items() if r == rank and s == stream])

    reads = {r: iv(r, "nvme_read") for r in ("0", "1")}
    writes = {r: iv(r, "nvme_write") for r in ("0", "1")}
    total = {r: sum(b - a for a, b in reads[r]) for r in reads}
    in_step = statistics.mean(overlap(reads[r], reads[o]) / total[r] for r, o in (("0", "1"), ("1", "0")))
    out_of_step = statistics.mean(overlap(reads[r], writes[o]) / total[r] for r, o in (("0", "1"), ("1", "0")))
    # Offsets of the same sub-group's read, over rank 0's period.
    names = sorted({n for (r, n), (s, _, _) in spans.items() if s == "nvme_read" and r == "0"},
                   key=lambda n: spans[("0", n)][1])
    starts0 = [spans[("0", n)][1] for n in names]
    period = (starts0[-1] - starts0[0]) / (len(starts0) - 1)
    offsets = [abs(spans[("1", n)][1] - spans[("0", n)][1]) / period for n in names if ("1", n) in spans]
    return in_step, out_of_step, statistics.median(offsets)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--strata", default=os.path.join(HERE, "..", "..", "build", "cli", "strata"))
    ap.add_argument("--work", default="/tmp/strata-rank-phase")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    mpi = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]
    print("| run | iteration | reads beside the other rank's reads | beside its writes | median offset / period |")
    print("|---|---|---|---|---|")
    durations = {}
    for k in range(args.rounds):
        path = os.path.join(args.work, f"run{k}.csv")
        out = sh(mpi + [args.strata, "run", SCENARIO, "--steps", "4", "--nvme-dir", os.path.join(args.work, "nvme"),
                        "--csv", path])
        it = next(line.split()[2] + " " + line.split()[3] for line in out.splitlines() if line.startswith("iteration time"))
        spans = step_spans(path)
        for key, (_, a, b) in spans.items():
            durations.setdefault(key, []).append(b - a)
        s, o, off = phase(spans)
        print(f"| measured, round {k + 1} | {it} | {100 * s:.0f}% | {100 * o:.0f}% | {off:.2f} |")
    for j in JITTERS:
        path = os.path.join(args.work, f"sim{j}.csv")
        out = sh([args.strata, "simulate", SCENARIO, "--jitter", j, "--csv", path])
        it = next(line.split()[2] + " " + line.split()[3] for line in out.splitlines() if line.startswith("iteration time"))
        s, o, off = phase(step_spans(path))
        print(f"| simulated, jitter {j} | {it} | {100 * s:.0f}% | {100 * o:.0f}% | {off:.2f} |")
    cv = [statistics.pstdev(v) / statistics.mean(v) for v in durations.values()
          if len(v) == args.rounds and statistics.mean(v) > 0]
    print(f"\nmeasured: one op's duration varies by {100 * statistics.median(cv):.0f}% from round to round "
          f"(median over the step's {len(cv)} ops of the coefficient of variation over {args.rounds} rounds)")


if __name__ == "__main__":
    main()
