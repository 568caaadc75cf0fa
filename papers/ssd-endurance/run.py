#!/usr/bin/env python3
"""Regenerates the SSD-endurance study: for the shipped NVMe scenarios,
drive writes per day and days to the rated writes as Strata plans them
(DeepSpeed's behaviour), then with each way to write less that Strata has
built (write buffering, compression at one and at eight codec threads a
stream), and with a second drive joined as RAID-0 or
striped by Strata, with the simulated iteration time of each. Writes
results.json and report.md (the tables README.md discusses). Usage (from
the repository root, after a build):

    python3 papers/ssd-endurance/run.py [--strata build/cli/strata] [--check]

--check (a test runs it) says whether results.json is still what this build
gives, without writing anything.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCENARIOS = {
    "Llama-2-13B, 1x A100-80GB, 1 drive": "scenarios/studies/llama2-13b-a100.yaml",
    "Llama-2-7B, 8x A100-80GB, 1 drive": "scenarios/studies/llama2-7b-8xa100.yaml",
    "Llama-2-70B, 8x A100-80GB, one 15 TB volume": "scenarios/llama-70b-8xa100.yaml",
}
# Each scenario's one drive (or volume), for the what-if of a second like it.
CAPACITY = {"Llama-2-13B, 1x A100-80GB, 1 drive": "15.36TB", "Llama-2-7B, 8x A100-80GB, 1 drive": "15.36TB",
            "Llama-2-70B, 8x A100-80GB, one 15 TB volume": "30TB"}
# Every drive rated 1 drive write a day over 5 years (a read-intensive
# data-centre drive such as the PM1733; write-intensive ones are rated 3).
RATING = ["--set", "hardware.nvme.rated_dwpd=1"]
VARIANTS = {
    "as planned (DeepSpeed)": [],
    "write buffering 1 MiB": ["--set", "policy.write_buffer=1MiB"],
    "zstd, 1 thread": ["--set", "policy.compression=zstd"],
    "zstd, 8 threads": ["--set", "policy.compression=zstd", "--set", "policy.compression_threads=8"],
    # A second drive like the first (twice the capacity and bandwidth):
    # joined as one RAID-0 volume (the wear taken as even), or striped by
    # Strata (each drive's own bytes).
    "2 drives, RAID-0": ["--set", "hardware.nvme.drives=2"],
    "2 drives, striped": ["--set", "hardware.nvme.drives=2", "--set", "policy.stripe_paths=/mnt/nvme0:/mnt/nvme1"],
}


def strata_json(cmd, ok=(0,)):
    """Runs a strata command with --json; its output, or exits naming it."""
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode not in ok:
        sys.exit("%s failed (%d): %s\n%s" % (" ".join(cmd[:2]), out.returncode, " ".join(cmd), out.stderr))
    return json.loads(out.stdout)


def point(strata, scenario, variant):
    cmd = [strata, "simulate", os.path.join(ROOT, SCENARIOS[scenario]), "--json"] + RATING + VARIANTS[variant]
    if variant.startswith("2 drives"):
        cmd += ["--set", "hardware.nvme.capacity=" + CAPACITY[scenario]]
    j = strata_json(cmd, ok=(0, 1))  # 1: does not fit (a what-if may not)
    w = j["nvme_wear"]
    # Rounded so that the check does not hang on the last bits of a float.
    return {"scenario": scenario, "variant": variant,
            "iteration_s": round(j["iteration_time_s"], 3),
            "drives": w["nvme_drives"],
            "gib_per_drive": round(w["nvme_host_bytes_per_drive"] / 2**30, 2),
            "raw_gib_per_drive": round(w["nvme_raw_bytes_per_drive"] / 2**30, 2),
            "writes_per_drive": w["nvme_writes_per_drive"],
            "write_amplification": round(w["nvme_write_amplification"], 4),
            "dwpd": round(w["nvme_drive_writes_per_day"], 2),
            "days": round(w["nvme_days_to_rated_writes"], 1)}


# ZeRO-Offload's delayed parameter update (policy.delayed_update,
# docs/dpu.md): GPT-2 1.5B on one V100 as shipped (ZeRO-2, Adam on the
# CPU), by micro batch.
DPU_SCENARIO = "scenarios/gpt2-1.5b-v100.yaml"
DPU_BATCHES = [1, 2, 4, 8, 16]
DPU_GPUS = [1]
DPU = ["--set", "policy.delayed_update.warmup_steps=40"]
# The measured host run (--measure; dpu_host.json): mlp-zero-offload.yaml
# (ZeRO-2, Adam on the CPU) on the host backend of the machine at hand.
HOST_SCENARIO = os.path.join(HERE, "mlp-zero-offload.yaml")
HOST_STEPS = 12


def dpu_point(strata, batch, gpus):
    row = {"micro_batch": batch, "gpus": gpus}
    for name, extra in (("ordinary", []), ("delayed", DPU)):
        cmd = [strata, "simulate", os.path.join(ROOT, DPU_SCENARIO), "--json",
               "--set", "training.micro_batch_size=%d" % batch,
               "--set", "hardware.gpus_per_node=%d" % gpus] + extra
        j = strata_json(cmd)
        row[name + "_s"] = round(j["iteration_time_s"], 3)
        if name == "ordinary":
            row["cpu_step_s"] = round(j["busy_time_s"]["cpu_optimizer"], 3)
            row["compute_s"] = round(j["busy_time_s"]["compute"], 3)
    row["speedup"] = round(row["ordinary_s"] / row["delayed_s"], 3)
    return row


def host_run(strata, delayed):
    cmd = [strata, "run", HOST_SCENARIO, "--steps", str(HOST_STEPS), "--json"]
    if delayed:
        cmd += ["--set", "policy.delayed_update.warmup_steps=1"]
    return strata_json(cmd)


def measure(strata):
    """Ordinary and delayed host runs, alternated round by round."""
    rounds = []
    for _ in range(5):
        row = {}
        for name, delayed in (("ordinary", False), ("delayed", True)):
            j = host_run(strata, delayed)
            # Steady steps only: after the warm-up and the step that only
            # keeps its gradients (and the first, which warms caches up),
            # none skipped for an overflow (no Adam work).
            steady = sorted(t for t, skipped in zip(j["step_time_s"][3:], j["step_skipped"][3:]) if not skipped)
            row[name + "_s"] = steady[len(steady) // 2]
        row["speedup"] = row["ordinary_s"] / row["delayed_s"]
        rounds.append(row)
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                         capture_output=True, text=True).stdout.strip()
    return {"cpu": cpu, "cores": os.cpu_count(), "steps": HOST_STEPS, "rounds": rounds}


def dpu_report(rows, host):
    lines = ["## Delayed parameter update: GPT-2 1.5B, ZeRO-Offload on V100s", "",
             "Simulated (`%s`, `policy.delayed_update.warmup_steps=40`): the steady iteration, ordinary and "
             "delayed; the CPU step and the compute stream's busy time of the ordinary one." % DPU_SCENARIO, "",
             "| GPUs | micro batch | compute s | CPU step s | ordinary s | delayed s | speed-up |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %d | %d | %.2f | %.2f | %.2f | %.2f | %.2fx |" % (
            r["gpus"], r["micro_batch"], r["compute_s"], r["cpu_step_s"], r["ordinary_s"], r["delayed_s"],
            r["speedup"]))
    lines += [""]
    if host:
        lines += ["Measured (`--measure`, dpu_host.json): `strata run mlp-zero-offload.yaml` on the host backend "
                  "(%s, %d cores; ZeRO-2, Adam on the CPU, warm-up 1), the median of steps 4-%d, "
                  "five rounds alternated." % (host["cpu"], host["cores"], host["steps"]), "",
                  "| round | ordinary s | delayed s | speed-up |", "|---|---|---|---|"]
        for i, r in enumerate(host["rounds"]):
            lines.append("| %d | %.4f | %.4f | %.2fx |" % (i + 1, r["ordinary_s"], r["delayed_s"], r["speedup"]))
        lines += ["", "| over the rounds | min | median | max |", "|---|---|---|---|"]
        for key, name in (("ordinary_s", "ordinary s"), ("delayed_s", "delayed s"), ("speedup", "speed-up")):
            v = sorted(r[key] for r in host["rounds"])
            lines.append("| %s | %.4g | %.4g | %.4g |" % (name, v[0], v[len(v) // 2], v[-1]))
        lines.append("")
    return lines


def report(points):
    lines = ["# SSD endurance: the tables", "",
             "Generated by `papers/ssd-endurance/run.py` (do not edit); README.md discusses them.", "",
             "Per drive and iteration: host bytes written (after compression), NAND amplification, drive writes",
             "a day at the simulated iteration rate, days until a 1-DWPD, 5-year drive's rated writes are used up.",
             ""]
    for scenario in SCENARIOS:
        lines += ["## " + scenario, "",
                  "| variant | iteration s | GiB a drive | writes a drive | NAND x | drive writes a day | days |",
                  "|---|---|---|---|---|---|---|"]
        for p in points:
            if p["scenario"] != scenario:
                continue
            gib = "%.1f" % p["gib_per_drive"]
            if p["raw_gib_per_drive"] > p["gib_per_drive"] * 1.0005:
                gib += " (of %.1f)" % p["raw_gib_per_drive"]
            lines.append("| %s | %.1f | %s | %d | %.3f | %.2f | %.0f |" % (
                p["variant"], p["iteration_s"], gib, p["writes_per_drive"], p["write_amplification"],
                p["dwpd"], p["days"]))
        lines.append("")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--strata", default=os.path.join(ROOT, "build", "cli", "strata"))
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--measure", action="store_true", help="also time host runs with and without DPU")
    a = ap.parse_args()
    points = [point(a.strata, s, v) for s in SCENARIOS for v in VARIANTS]
    dpu = [dpu_point(a.strata, b, g) for g in DPU_GPUS for b in DPU_BATCHES]
    results = {"rating": "1 DWPD, 5 years", "points": points, "delayed_update": dpu}
    path = os.path.join(HERE, "results.json")
    host_path = os.path.join(HERE, "dpu_host.json")
    host = None
    if a.measure:
        host = measure(a.strata)
        with open(host_path, "w") as f:
            json.dump(host, f, indent=1)
            f.write("\n")
    elif os.path.exists(host_path):
        with open(host_path) as f:
            host = json.load(f)
    if a.check:
        with open(path) as f:
            old = json.load(f)
        if old != results:
            sys.exit("papers/ssd-endurance/results.json is not what this build gives: run "
                     "python3 papers/ssd-endurance/run.py and commit the result")
        print("papers/ssd-endurance: results.json is current")
        return
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    with open(os.path.join(HERE, "report.md"), "w") as f:
        f.write("\n".join(report(points) + dpu_report(dpu, host)) + "\n")


if __name__ == "__main__":
    main()
