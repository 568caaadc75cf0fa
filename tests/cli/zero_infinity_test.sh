#!/usr/bin/env bash
# The ZeRO-Infinity reproduction (papers/zero-infinity/run.py --quick) runs
# from the build: every Fig. 5c row feasible (v0.5's stage-3 buffers keep
# 0.5T and 1T in the DGX-2's CPU memory) with a TFLOPS figure within 15% of
# the paper's (issue #15's target), at the simulator's default jitter, 1e-3
# (README.md Assumptions 6 gives 1e-2 too, not checked here: there the 100B
# row is the closest to the limit, 11% fast); every Fig. 5a row with a figure and an error too (1T with its optimizer states on
# CPU, as DeepSpeed's ZeRO-3 Offload announcement ran it);
# Megatron-LM v1.0's published 1.2B and 4.2B runs each within 15%; and
# DeepSpeed PR #1453's 10B RoBERTa runs in both stage-3 releases; the
# talk's Fig. 6c speedup needs the coordinator's trace aligned; ZeRO-3
# Offload's 200B grows per GPU with the cluster in Strata (v0.3.13, which
# refuses NVMe); and the README's two main tables are what run.py prints.
# Usage: zero_infinity_test.sh STRATA SOURCE_DIR
set -euo pipefail
strata="$1"
src="$2"
out="$(mktemp)"
trap 'rm -f "$out" "$out.v0.5" "$out.current"' EXIT
python3 "$src/papers/zero-infinity/run.py" --quick "$strata" >"$out"
cat "$out"
python3 - "$out" "$src/papers/zero-infinity/README.md" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
c, a = text.split("Fig. 5a")
def rows(section):
    return [[x.strip() for x in l.strip().strip("|").split("|")] for l in section.splitlines()
            if re.match(r"\| (10B|50B|100B|0\.5T|1T|5T|10T|20T) \|", l)]
fig5c, fig5a = rows(c), rows(a)
assert [r[0] for r in fig5c] == ["10B", "50B", "100B", "0.5T", "1T"], fig5c
assert [r[0] for r in fig5a] == ["0.5T", "1T", "5T", "10T", "20T"], fig5a
for r in fig5c:  # every single-node row fits (v0.5's buffers), within 15% of the paper
    assert float(r[2]) > 0 and re.fullmatch(r"[+-]\d+%", r[3]), r
    assert abs(float(r[2]) - float(r[1])) <= 0.15 * float(r[1]), r
for r in fig5a:  # every row fits too (1T with its optimizer on CPU, 10T and 20T tiled)
    assert float(r[3]) > 0 and re.fullmatch(r"[+-]\d+%", r[4]), r
print("ok: Fig. 5c rows within 15% of the paper, 5a rows with figures and errors")
# The README's two main tables are this build's: each row as run.py prints it.
readme = open(sys.argv[2]).read()
stale = [l for l in text.splitlines() if re.match(r"\| (10B|50B|100B|0\.5T|1T|5T|10T|20T) \|", l) and l not in readme.splitlines()]
assert not stale, "papers/zero-infinity/README.md's tables are stale; run.py now prints:\n" + "\n".join(stale)
print("ok: README.md's Fig. 5c and 5a tables are this build's")
PY
# The same V100 compute model against Megatron-LM v1.0's published runs
# (README.md "The V100 compute model without ZeRO"): the 1.2B on one GPU,
# 1288 ms, and the 4.2B with model parallel 4, 1357 ms: each within 15%, a
# guard on the model the rows are judged with.
for row in 1.2b:1288 4.2b:1357; do
  "$strata" simulate "$src/papers/zero-infinity/megatron-v1-${row%%:*}.yaml" --json >"$out"
  python3 - "$out" "${row%%:*}" "${row##*:}" <<'PY'
import json, sys
j, name, published = json.load(open(sys.argv[1])), sys.argv[2], float(sys.argv[3])
ms = 1e3 * j["iteration_time_s"]
assert j["feasible"] and abs(ms - published) / published < 0.15, (name, ms)
print(f"ok: Megatron-LM v1.0's {name.upper()} in {ms:.0f} ms (published {published:.0f})")
PY
done
# DeepSpeed's before/after measurement of its paper-era stage 3 (README.md,
# PR #1453): both releases' runs fit, and the paper-era one is the slower.
for mode in v0.5 current; do
  "$strata" simulate "$src/papers/zero-infinity/pr1453-roberta-10b.yaml" --json \
    --set "policy.deepspeed_stage3=$mode" >"$out.$mode"
done
python3 - "$out.v0.5" "$out.current" <<'PY'
import json, sys
before, after = (json.load(open(f)) for f in sys.argv[1:3])
assert before["feasible"] and after["feasible"], "PR #1453 runs do not fit"
assert before["tflops_per_gpu"] < after["tflops_per_gpu"], (before["tflops_per_gpu"], after["tflops_per_gpu"])
print(f"ok: PR #1453's 10B RoBERTa, v0.5 {before['tflops_per_gpu']:.1f} < current {after['tflops_per_gpu']:.1f} TFLOPS")
PY
# The talk's Fig. 6c (README.md "The talk's Fig. 6c"): at batch 2 the
# paper's coordinator with its trace aligned is over 15% faster than with
# its prefetch disabled and overlap_comm off (the talk: 1.29), and with the
# trace off by one turning the prefetch on gains under 2% (what the README's
# reading of the figure rests on).
f6="$src/papers/zero-infinity/fig6c-8b.yaml"
for v in on:true:true off:false:false off1on:false:true; do
  IFS=: read -r name aligned overlap <<<"$v"
  "$strata" simulate "$f6" --json --set "policy.aligned_trace=$aligned" \
    --set "zero_optimization.overlap_comm=$overlap" >"$out.$name"
done
python3 - "$out.on" "$out.off" "$out.off1on" <<'PY'
import json, sys
on, off, off1on = (json.load(open(f))["iteration_time_s"] for f in sys.argv[1:4])
assert off / on > 1.15, (on, off)
assert off / off1on < 1.02, (off1on, off)
print(f"ok: Fig. 6c at batch 2: prefetch on/off {off / on:.2f} (talk 1.29), trace off by one {off / off1on:.3f}")
PY
rm -f "$out.on" "$out.off" "$out.off1on"
# ZeRO-3 Offload's 200B scaling (README.md): at a fixed batch per GPU
# Strata's throughput per GPU only grows from 128 to 512 GPUs (the
# announcement's falls 5%), and v0.3.13 refuses NVMe offload (exit 2).
for n in 8 32; do
  "$strata" simulate "$src/papers/zero-infinity/zero3-offload-200b.yaml" --json --set "hardware.nodes=$n" >"$out.$n"
done
python3 - "$out.8" "$out.32" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert a["feasible"] and b["feasible"]
assert b["tokens_per_s"] / 512 > a["tokens_per_s"] / 128, (a["tokens_per_s"], b["tokens_per_s"])
print(f"ok: 200B per GPU, 512 over 128 GPUs: {b['tokens_per_s'] / 512 / (a['tokens_per_s'] / 128):.3f} (announced 0.954)")
PY
rm -f "$out.8" "$out.32"
rc=0
"$strata" simulate "$src/papers/zero-infinity/zero3-offload-200b.yaml" \
  --set zero_optimization.offload_optimizer.device=nvme >"$out" 2>&1 || rc=$?
[ "$rc" = 2 ] || { cat "$out"; echo "v0.3.13 with NVMe offload: exit $rc, expected 2" >&2; exit 1; }
grep -q "ZeRO-3 Offload offloads to CPU only" "$out" || { cat "$out"; exit 1; }
echo "ok: v0.3.13 refuses NVMe offload (exit 2)"
