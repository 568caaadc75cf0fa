#!/usr/bin/env bash
# End-to-end checks of the strata binary: outputs and exit codes.
# Usage: cli_test.sh STRATA_BINARY SOURCE_DIR [SECTION]
# Without SECTION every section runs, one after the other; CTest runs each
# section as its own test (cli_test.SECTION, tests/CMakeLists.txt), so they
# run in parallel. Sections share nothing but the set-up above the first.
set -u
strata=$1
src=$(cd "$2" && pwd)
only=${3:-}
sections="scenarios input endurance fsdp simulate sweep limits compare run calibrate tune"
[ -z "$only" ] || case " $sections " in *" $only "*) ;; *) echo "cli_test.sh: no section '$only' (one of: $sections)"; exit 2 ;; esac
section() { [ -z "$only" ] || [ "$only" = "$1" ]; }
# A directory of our own name, which a cleaner of /tmp/tmp.* elsewhere on
# the machine does not match (one fresh-clone run lost its directory in the
# signal checks below; the cause was not found: strata removes only its
# own run-<pid> directory).
tmp=$(mktemp -d "${TMPDIR:-/tmp}/strata-cli-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0

expect_rc() {  # expect_rc WANT DESCRIPTION CMD...
  local want=$1 what=$2
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL: $what: exit $rc, want $want"; sed 's/^/  | /' "$tmp/out" "$tmp/err" | head -20; fails=$((fails + 1))
  else
    echo "ok: $what"
  fi
}
# The "under 4 GiB, under 5 s" checks, each in a subshell that calls capmem.
# Under the sanitizer job (STRATA_SANITIZED, scripts/sanitize.sh) ASan
# reserves terabytes of virtual shadow memory, so ulimit -v cannot be used:
# ASan's hard_rss_limit_mb bounds memory instead (twice the bound: ASan's
# own memory), and the time allowance is four times longer. It is set
# here only: ASan's RSS watcher makes every process 2-4x slower.
capmem() {
  if [ -n "${STRATA_SANITIZED:-}" ]; then
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}hard_rss_limit_mb=8192"
  else
    ulimit -v 4000000
  fi
}
t5=5
[ -n "${STRATA_SANITIZED:-}" ] && t5=20
# A model that does not fit one GPU (the input and simulate sections).
printf 'model: {kind: mlp, sizes: [20000, 20000, 10]}\nhardware:\n  gpu: {memory: 1GiB, peak_flops: 1TFLOPS}\n  cpu: {memory: 64GiB}\n' >"$tmp/big.yaml"
expect_grep() {  # expect_grep FILE PATTERN DESCRIPTION
  if ! grep -q -- "$2" "$1"; then echo "FAIL: $3: no '$2' in output"; sed 's/^/  | /' "$1" | head -20; fails=$((fails + 1)); fi
}

if section scenarios; then
expect_rc 0 "estimate default scenario" "$strata" estimate
expect_grep "$tmp/out" "FITS" "estimate says it fits"
expect_rc 0 "estimate --json" "$strata" estimate --json
python3 - "$tmp/out" <<'PY' || fails=$((fails + 1))
import json, sys
j = json.load(open(sys.argv[1]))
assert j["feasible"] is True, j["feasible"]
for t in ("gpu", "cpu", "nvme"):
    for k in ("capacity_bytes", "peak_bytes", "model_states_bytes", "activation_bytes", "buffer_bytes"):
        assert isinstance(j["tiers"][t][k], int), (t, k)
assert j["violations"] == []
print("ok: estimate --json schema")
PY
expect_rc 0 "scenarios --json" "$strata" scenarios --json
python3 - "$tmp/out" <<'PY' || fails=$((fails + 1))
import json, sys
rows = {r["name"]: r for r in json.load(open(sys.argv[1]))}
seed = rows["builtin:seed"]
assert seed["model"] == "mlp" and seed["gpus"] == 1 and seed["zero_stage"] == 3, seed
assert seed["offload_param"] == "nvme" and seed["parameters"] > 1e6, seed
assert all("error" not in r for r in rows.values()), rows
print("ok: scenarios --json schema")
PY
expect_rc 0 "plan with -o" "$strata" plan builtin:seed -o "$tmp/plan.json"
expect_grep "$tmp/out" "ops by kind" "plan summary"
expect_grep "$tmp/out" "nvme_read" "plan summary bytes per link"
python3 -c "import json,sys; p=json.load(open(sys.argv[1])); assert p['format']=='strata.plan' and len(p['ops'])>0" "$tmp/plan.json" \
  && echo "ok: plan JSON written" || { echo "FAIL: plan JSON"; fails=$((fails + 1)); }
# gpt-1t-dgx2 is the paper's configuration, which current DeepSpeed's CPU
# gradient accumulator (2 bytes per parameter per rank) does not let fit.
fits() { [ "$(basename "$1")" != gpt-1t-dgx2.yaml ] && echo 0 || echo 1; }
for f in "$src"/scenarios/*.yaml; do
  expect_rc "$(fits "$f")" "estimate $(basename "$f")" "$strata" estimate "$f"
  expect_rc "$(fits "$f")" "plan $(basename "$f")" "$strata" plan "$f" --json
done
expect_rc 1 "the paper's 1T on one DGX-2" "$strata" estimate builtin:gpt-1t-dgx2
expect_grep "$tmp/out" "grad.partition.cpu *117.35 GiB *x16 pinned" "the CPU gradient accumulator is listed"
fi

if section input; then
# A config DeepSpeed refuses is bad input (exit 2), said as such, not a
# memory shortage.
expect_rc 2 "a DeepSpeed refusal is bad input" "$strata" estimate builtin:seed --set zero_optimization.offload_param.buffer_size=1000
expect_grep "$tmp/out" "^DEEPSPEED WOULD REFUSE THIS CONFIG" "estimate says DeepSpeed would refuse it"
expect_grep "$tmp/out" "Set buffer_size >= 1000000" "and how to fix it"
expect_rc 2 "simulate refuses it too" "$strata" simulate builtin:seed --set zero_optimization.offload_param.buffer_size=1000
expect_grep "$tmp/err" "DeepSpeed would refuse this config \[buffer_size_too_small\]" "simulate names the rule"
# Bad input: exit 2 with file:line:column.
printf 'model: {kind: mlp, sizes: [4, 2]}\nhardware:\n  gpu: {memory: 1GiB, peak_flops: 1TFLOPS}\n  cpu: {memory: 1GiB}\nzero_optimization: {stage: 5}\n' >"$tmp/bad.yaml"
expect_rc 2 "stage 5 is bad input" "$strata" estimate "$tmp/bad.yaml"
expect_grep "$tmp/err" "bad.yaml:5:28: zero_optimization.stage" "stage 5 located"
printf 'model: {kind: mlp, sizes: [4, 2], sise: 3}\nhardware:\n  gpu: {memory: 1GiB, peak_flops: 1TFLOPS}\n  cpu: {memory: 1GiB}\n' >"$tmp/unknown.yaml"
expect_rc 2 "unknown key is bad input" "$strata" plan "$tmp/unknown.yaml"
expect_grep "$tmp/err" "did you mean 'sizes'" "did you mean"
expect_rc 2 "missing file" "$strata" estimate "$tmp/nope.yaml"
# Devices and oversized files are refused before they are read (docs/limits.md).
expect_rc 2 "a device as the scenario" "$strata" estimate /dev/zero
expect_grep "$tmp/err" "'/dev/zero' is a character device" "says what it is"
expect_rc 2 "a device as the DeepSpeed config" "$strata" estimate builtin:seed --deepspeed /dev/urandom
expect_rc 2 "a device as the hardware" "$strata" estimate builtin:seed --hardware /dev/zero
head -c 5000000 /dev/zero | tr '\0' ' ' >"$tmp/huge.yaml"
expect_rc 2 "a 5 MB scenario" "$strata" estimate "$tmp/huge.yaml"
expect_grep "$tmp/err" "is 5000000 bytes, over the limit of 4194304 bytes" "says the size and the limit"
expect_rc 2 "unknown option" "$strata" estimate --frobnicate
expect_rc 2 "no subcommand" "$strata"
# strata scenarios NAME prints a built-in's YAML, which loads as a file.
expect_rc 0 "scenarios seed" "$strata" scenarios seed
cp "$tmp/out" "$tmp/seed_copy.yaml"
expect_grep "$tmp/out" "^name: seed" "built-in YAML printed"
expect_rc 0 "printed YAML estimates" "$strata" estimate "$tmp/seed_copy.yaml"
expect_rc 2 "scenarios unknown" "$strata" scenarios nope
expect_grep "$tmp/err" "no built-in scenario 'nope'" "names the unknown scenario"
expect_rc 0 "--help" "$strata" estimate --help
expect_rc 0 "plan --help" "$strata" plan --help
# A command that uses no GPU does not load cuBLAS (half a gigabyte, 0.5 s
# of CPU at every start): the CUDA backend opens it at its first call
# (executor/cuda/cublas_loader.cc).
LD_DEBUG=files "$strata" estimate >/dev/null 2>"$tmp/ld"
if grep -q "file=/.*libcublas" "$tmp/ld" || grep -q "file=libcublas" "$tmp/ld"; then
  echo "FAIL: strata estimate loads cuBLAS"; grep libcublas "$tmp/ld" | head -3; fails=$((fails + 1))
else
  echo "ok: strata estimate does not load cuBLAS"
fi

# Infeasible: exit 1 with the tier and bytes over.
expect_rc 1 "infeasible estimate" "$strata" estimate "$tmp/big.yaml"
expect_grep "$tmp/out" "gpu tier over capacity" "names the tier"
expect_grep "$tmp/out" "over by" "names the bytes over"
expect_rc 1 "infeasible plan" "$strata" plan "$tmp/big.yaml"

# --deepspeed overrides zero_optimization.
printf '{"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}\n' >"$tmp/ds.json"
expect_rc 0 "--deepspeed" "$strata" plan builtin:gpt2-1.5b-v100 --deepspeed "$tmp/ds.json" --json
expect_grep "$tmp/out" '"zero_stage": 2' "deepspeed stage applied"
printf '{\n  "zero_optimization": {"stage": 4}\n}\n' >"$tmp/ds.json"
expect_rc 2 "--deepspeed with a bad stage" "$strata" estimate builtin:gpt2-1.5b-v100 --deepspeed "$tmp/ds.json"
expect_grep "$tmp/err" "ds.json:2:34: zero_optimization.stage" "error located in the JSON"
fi

if section endurance; then
# SSD wear (docs/endurance.md): the seed writes to NVMe every step, far
# over a 1 DWPD drive's rating: reported, and warned of, in estimate,
# simulate and run.
expect_rc 0 "simulate with a rated drive" "$strata" simulate builtin:seed --set hardware.nvme.rated_dwpd=1 --json
expect_grep "$tmp/out" '"nvme_days_to_rated_writes": [0-9]' "simulate gives the days to the rated writes"
expect_rc 0 "estimate with a rated drive" "$strata" estimate builtin:seed --set hardware.nvme.model=samsung-pm1733-7.68tb
expect_grep "$tmp/out" "warning \[nvme_endurance\]" "estimate warns of wear within the warranty"
expect_rc 0 "run with a rated drive" "$strata" run builtin:seed --steps 1 --set hardware.nvme.rated_dwpd=3
expect_grep "$tmp/out" "nvme wear (per drive, at the measured iteration time)" "run reports the wear"
expect_rc 2 "a zero rating" "$strata" simulate builtin:seed --set hardware.nvme.rated_dwpd=0
expect_grep "$tmp/err" "hardware.nvme.rated_dwpd: must be above 0" "names the rating"
# Compression (docs/endurance.md, Compression): planned, simulated and run;
# bad keys refused by name.
expect_rc 0 "plan with compression" "$strata" plan builtin:seed --set policy.compression=zstd
expect_grep "$tmp/out" "compression: zstd, 0.8" "the plan gives the bytes planned to reach the drive"
expect_rc 0 "simulate with compression" "$strata" simulate builtin:seed --set policy.compression=zstd
expect_grep "$tmp/out" "compressed from" "the wear counts the compressed bytes"
expect_rc 0 "run with compression" "$strata" run builtin:seed --steps 2 --set policy.compression=lz4
expect_grep "$tmp/out" "nvme compression .* (stored/raw 0\.[0-9]*, measured" "run measures what it wrote"
expect_rc 2 "an unknown codec" "$strata" plan builtin:seed --set policy.compression=gzip
expect_grep "$tmp/err" "policy.compression" "names the key"
expect_rc 2 "a level out of the codec's range" "$strata" plan builtin:seed --set policy.compression=zstd \
  --set policy.compression_level=40
expect_grep "$tmp/err" "policy.compression_level: must be within zstd's 1..19" "names the level and the range"
expect_rc 2 "a ratio over 1" "$strata" plan builtin:seed --set policy.compression=zstd --set policy.compression_ratio=1.5
expect_grep "$tmp/err" "policy.compression_ratio" "names the ratio"
expect_rc 2 "no threads" "$strata" plan builtin:seed --set policy.compression=zstd --set policy.compression_threads=0
expect_grep "$tmp/err" "policy.compression_threads" "names the threads"
# Striping (docs/endurance.md, Striping): simulated per drive, refused by
# name without a directory per drive.
expect_rc 0 "simulate striped" "$strata" simulate builtin:seed --set hardware.nvme.drives=2 \
  --set policy.stripe_paths=/tmp/strata-a:/tmp/strata-b
expect_grep "$tmp/out" "busiest of 2 striped drives" "the wear gives the busiest drive"
expect_rc 2 "one stripe directory" "$strata" plan builtin:seed --set policy.stripe_paths=/tmp/strata-a
expect_grep "$tmp/err" "policy.stripe_paths: lists one directory" "names the key"
expect_rc 2 "stripes and drives differ" "$strata" plan builtin:seed --set policy.stripe_paths=/tmp/strata-a:/tmp/strata-b
expect_grep "$tmp/err" "hardware.nvme.drives is 1" "says how many drives"
expect_rc 2 "a stripe directory twice" "$strata" plan builtin:seed --set hardware.nvme.drives=2 \
  --set policy.stripe_paths=/tmp/strata-a:/tmp/strata-a
expect_grep "$tmp/err" "twice" "names the repeated directory"
expect_rc 2 "stripes of 1.5 KiB" "$strata" plan builtin:seed --set hardware.nvme.drives=2 \
  --set policy.stripe_paths=/tmp/strata-a:/tmp/strata-b/ --set aio.block_size=1536
expect_grep "$tmp/err" "multiple of 4 KiB" "says why"
# The delayed parameter update (docs/dpu.md): planned and run with the CPU
# optimizer of stages 1-2, refused by name without it.
dpu_set="--set zero_optimization.stage=2 --set zero_optimization.offload_param.device=none"
dpu_set="$dpu_set --set zero_optimization.offload_optimizer.device=cpu --set policy.prefetch_optimizer_states=false"
# shellcheck disable=SC2086
expect_rc 0 "plan with a delayed update" "$strata" plan builtin:seed $dpu_set --set policy.delayed_update.warmup_steps=2
expect_grep "$tmp/out" "delayed parameter update" "the plan says so"
# shellcheck disable=SC2086
expect_rc 0 "run with a delayed update" "$strata" run builtin:seed --steps 4 $dpu_set \
  --set policy.delayed_update.warmup_steps=1
expect_grep "$tmp/out" "step 2 .*no update: the delayed update keeps these gradients" "step N only keeps its gradients"
expect_rc 2 "a delayed update without the CPU optimizer" "$strata" plan builtin:seed \
  --set policy.delayed_update.warmup_steps=2
expect_grep "$tmp/err" "policy.delayed_update: .*the optimizer is on NVMe" "names the key and the reason"
fi

if section fsdp; then
# framework: fsdp is planned, estimated, simulated and run; what the
# executor does not run is refused by name (docs/fsdp.md).
printf 'model: {kind: transformer, layers: 2, hidden_size: 64, num_heads: 4}\nhardware: {gpu: {memory: 1GiB, peak_flops: 1TFLOPS, efficiency: 1.0}, cpu: {memory: 8GiB}}\nframework: fsdp\n' >"$tmp/fsdp.yaml"
expect_rc 0 "plan of framework: fsdp" "$strata" plan "$tmp/fsdp.yaml"
expect_grep "$tmp/out" "FSDP2, 1 rank" "the plan says it is FSDP2's"
expect_rc 0 "estimate of framework: fsdp" "$strata" estimate "$tmp/fsdp.yaml"
expect_grep "$tmp/out" "FSDP2, sharded states" "the estimate gives FSDP2's figure"
expect_rc 0 "simulate of framework: fsdp" "$strata" simulate "$tmp/fsdp.yaml"
expect_rc 0 "run of framework: fsdp" "$strata" run "$tmp/fsdp.yaml" --steps 1
expect_rc 0 "run of fsdp with param_dtype fp32" "$strata" run "$tmp/fsdp.yaml" --steps 1 --set fsdp.mp_policy.param_dtype=fp32
expect_rc 2 "run of fsdp reducing in fp32" "$strata" run "$tmp/fsdp.yaml" --steps 1 --set fsdp.mp_policy.reduce_dtype=fp32
expect_grep "$tmp/err" "reduces gradients in param_dtype only" "says reduce_dtype is not run"
expect_rc 0 "compare --frameworks" "$strata" compare "$tmp/fsdp.yaml" --frameworks deepspeed,fsdp
expect_grep "$tmp/out" "fsdp: FSDP2 FULL_SHARD" "compare names FSDP2's setup"
expect_grep "$tmp/out" "deepspeed: ZeRO-3" "compare names ZeRO's setup"
expect_rc 2 "compare --frameworks with an unknown one" "$strata" compare "$tmp/fsdp.yaml" --frameworks deepspeed,megatron
expect_grep "$tmp/err" "unknown framework 'megatron'" "says which framework is unknown"
expect_rc 2 "compare --frameworks and --policies" "$strata" compare "$tmp/fsdp.yaml" --frameworks fsdp --policies lru
expect_rc 2 "run of fsdp offload with two micro steps" "$strata" run "$tmp/fsdp.yaml" --steps 1 \
  --set fsdp.offload_policy=cpu --set training.gradient_accumulation_steps=2
expect_grep "$tmp/err" "fsdp.offload_policy: strata run executes CPU offload with one micro step" "says what is not run"
fi

if section simulate; then
# A progress bar on a terminal (script gives the command one); the replay
# runs in a helper process, so the parent draws it.
if command -v script >/dev/null; then
  script -qec "$strata simulate builtin:seed >/dev/null" /dev/null >"$tmp/tty" 2>&1
  expect_grep "$tmp/tty" "simulating \[" "simulate draws progress on a terminal"
fi
# simulate: JSON fields, trace and CSV files, determinism.
expect_rc 0 "simulate --json" "$strata" simulate builtin:seed --json --trace "$tmp/seed.trace.json" --csv "$tmp/seed.csv"
cp "$tmp/out" "$tmp/sim1.json"
python3 - "$tmp/out" <<'PY' || fails=$((fails + 1))
import json, sys
j = json.load(open(sys.argv[1]))
for k in ("iteration_time_s", "tflops_per_gpu", "samples_per_s", "activities", "bottleneck"):
    assert k in j, k
for t in ("gpu", "cpu", "nvme"):
    assert isinstance(j["peak_bytes"][t], int), t
for c in ("compute", "h2d", "d2h", "nvme_read", "nvme_write", "collective", "cpu_optimizer"):
    assert j["exposed_time_s"][c] >= 0, c
assert j["iteration_time_s"] > 0
assert 0 < j["compute_only_s"] <= j["iteration_time_s"] and abs(j["compute_fraction"] - j["compute_only_s"] / j["iteration_time_s"]) < 1e-12
print("ok: simulate --json schema")
PY
python3 -c "import json,sys; t=json.load(open(sys.argv[1])); assert len(t['traceEvents'])>0" "$tmp/seed.trace.json" \
  && echo "ok: trace written" || { echo "FAIL: trace"; fails=$((fails + 1)); }
[ -s "$tmp/seed.csv" ] && [ -s "$tmp/seed.memory.csv" ] && echo "ok: csv written" || { echo "FAIL: csv files"; fails=$((fails + 1)); }
expect_rc 0 "simulate again" "$strata" simulate builtin:seed --json --trace "$tmp/seed2.trace.json"
cmp -s "$tmp/out" "$tmp/sim1.json" && cmp -s "$tmp/seed.trace.json" "$tmp/seed2.trace.json" \
  && echo "ok: deterministic" || { echo "FAIL: simulate output differs between runs"; fails=$((fails + 1)); }
expect_rc 0 "simulate text" "$strata" simulate builtin:gpt2-1.5b-v100
expect_grep "$tmp/out" "bottleneck:" "names the bottleneck"
expect_rc 2 "simulate bad collective model" "$strata" simulate --collectives tree
expect_rc 1 "simulate infeasible exits 1" "$strata" simulate "$tmp/big.yaml"
# Infeasible is never shown as a result: the report opens with DOES NOT FIT
# and the violation, and the speed figures say they would not run.
head -1 "$tmp/out" | grep -q "^DOES NOT FIT" && echo "ok: infeasible report opens with DOES NOT FIT" \
  || { echo "FAIL: infeasible report's first line"; head -3 "$tmp/out"; fails=$((fails + 1)); }
expect_grep "$tmp/out" "gpu tier over capacity" "infeasible report names the violation"
expect_grep "$tmp/out" "FLOPS per GPU   (would not run)" "speed marked as not run"
expect_rc 1 "simulate infeasible --json" "$strata" simulate "$tmp/big.yaml" --json
python3 - "$tmp/out" <<'PY' || fails=$((fails + 1))
import json, sys
j = json.load(open(sys.argv[1]))
assert j["feasible"] is False, j["feasible"]
assert j["violations"] and j["violations"][0]["kind"] == "capacity" and j["violations"][0]["tier"] == "gpu", j["violations"]
assert j["violations"][0]["needed_bytes"] > j["violations"][0]["capacity_bytes"]
assert j["iteration_time_s"] is None and j["tflops_per_gpu"] is None and j["samples_per_s"] is None
print("ok: infeasible simulate --json: feasible, violations, no speed")
PY
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['feasible'] is True and j['violations']==[]" "$tmp/sim1.json" \
  && echo "ok: feasible simulate --json says so" || { echo "FAIL: feasible simulate --json"; fails=$((fails + 1)); }
fi

if section sweep; then
# sweep: one row per point, in order; a bad value is bad input.
expect_rc 0 "sweep" "$strata" sweep builtin:seed --set hardware.pcie.bandwidth=1GB/s,4GB/s --set training.micro_batch_size=2,4 -j 2
[ "$(wc -l < "$tmp/out")" -eq 5 ] && echo "ok: sweep rows" || { echo "FAIL: sweep rows"; cat "$tmp/out"; fails=$((fails + 1)); }
expect_grep "$tmp/out" "^1GB/s,1000000000,2,2,true," "first point first (value, then base units)"
expect_grep "$tmp/out" "^4GB/s,4000000000,4,4,true," "last point last"
# Ranges and linked keys: 1GB/s:4GB/s:1GB/s is four values, *2 doubles;
# --zip varies read and write bandwidth together (one dimension).
expect_rc 0 "sweep range" "$strata" sweep builtin:seed --set hardware.pcie.bandwidth=1GB/s:4GB/s:1GB/s
[ "$(wc -l < "$tmp/out")" -eq 5 ] && echo "ok: sweep range rows" || { echo "FAIL: sweep range"; cat "$tmp/out"; fails=$((fails + 1)); }
expect_grep "$tmp/out" "^3GB/s,3000000000," "range value"
expect_rc 0 "sweep geometric zip" "$strata" sweep builtin:seed --set training.micro_batch_size=1:8:*2 \
  --zip hardware.nvme.read_bandwidth=1GB/s,2GB/s --zip hardware.nvme.write_bandwidth=1GB/s,2GB/s
[ "$(wc -l < "$tmp/out")" -eq 9 ] && echo "ok: 4 x 2 points" || { echo "FAIL: sweep zip rows"; cat "$tmp/out"; fails=$((fails + 1)); }
expect_grep "$tmp/out" "^8,8,2GB/s,2000000000,2GB/s,2000000000,true," "zipped keys move together"
expect_rc 2 "sweep zip of unequal lengths" "$strata" sweep builtin:seed --zip hardware.nvme.read_bandwidth=1GB/s,2GB/s \
  --zip hardware.nvme.write_bandwidth=1GB/s
expect_rc 2 "sweep bad range" "$strata" sweep builtin:seed --set hardware.pcie.bandwidth=4GB/s:1GB/s:1GB/s
expect_grep "$tmp/err" "the end is below the start" "names the bad range"
expect_rc 2 "sweep bad value" "$strata" sweep builtin:seed --set hardware.pcie.bandwidth=fast
expect_grep "$tmp/err" "hardware.pcie.bandwidth" "names the key"
expect_rc 2 "sweep bad --set" "$strata" sweep builtin:seed --set nokey
expect_rc 0 "sweep json" "$strata" sweep builtin:seed --set zero_optimization.offload_param.device=cpu,nvme --json -o "$tmp/sweep.json"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert len(r)==2 and r[0]['set']['zero_optimization.offload_param.device']=='cpu' and r[1]['iteration_time_s']>0" "$tmp/sweep.json" \
  && echo "ok: sweep json" || { echo "FAIL: sweep json"; fails=$((fails + 1)); }
# A sweep with an infeasible point: feasible false, the violation named,
# speed left blank, exit 1; every CSV row as wide as the header.
expect_rc 1 "sweep with an infeasible point" "$strata" sweep builtin:seed --set hardware.gpu.memory=1GiB,2MiB
python3 - "$tmp/out" <<'PY' || fails=$((fails + 1))
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head = rows[0]
assert all(len(r) == len(head) for r in rows), [len(r) for r in rows]
ok, bad = (dict(zip(head, r)) for r in rows[1:])
assert ok["feasible"] == "true" and ok["violation"] == "" and float(ok["tflops_per_gpu"]) > 0, ok
assert 0 < float(ok["compute_fraction"]) <= 1 and abs(float(ok["compute_only_s"]) / float(ok["iteration_time_s"]) - float(ok["compute_fraction"])) < 1e-6, ok
assert bad["feasible"] == "false" and "over capacity" in bad["violation"], bad
assert bad["iteration_time_s"] == "" and bad["tflops_per_gpu"] == "" and bad["samples_per_s"] == "", bad
assert ok["scenario"] == "builtin:seed" and ok["strata_version"] and bad["strata_version"] == ok["strata_version"], ok
print("ok: sweep infeasible row (and every row says where it came from)")
PY
expect_grep "$tmp/err" "1 of 2 points do not fit" "sweep says how many do not fit"
# Reports and traces record what they came from: version, scenario, overrides.
expect_rc 0 "simulate provenance" "$strata" simulate builtin:seed --json --set training.micro_batch_size=2 --trace "$tmp/prov.json"
python3 - "$tmp/out" "$tmp/prov.json" "$("$strata" --version)" <<'PY' || fails=$((fails + 1))
import json, sys
j = json.load(open(sys.argv[1]))
version = sys.argv[3].split()[-1]
# The simulator's jitter is recorded beside the overrides (its defaults too).
want = {"training.micro_batch_size": "2", "--jitter": "0.001", "--jitter-seed": "0"}
assert j["provenance"] == {"strata_version": version, "scenario_path": "builtin:seed",
                           "overrides": want}, j["provenance"]
o = json.load(open(sys.argv[2]))["otherData"]
assert o["strata_version"] == version and o["scenario_path"] == "builtin:seed", o
assert o["overrides"] == want, o
print("ok: simulate and trace provenance")
PY
expect_rc 1 "sweep json infeasible" "$strata" sweep builtin:seed --set hardware.gpu.memory=2MiB --json
python3 -c "import json,sys; r=json.load(open(sys.argv[1]))[0]; assert r['feasible'] is False and r['violations'][0]['kind']=='capacity' and r['tflops_per_gpu'] is None" "$tmp/out" \
  && echo "ok: sweep json infeasible" || { echo "FAIL: sweep json infeasible"; fails=$((fails + 1)); }
# A point that fails: its error in the last column, rows still aligned.
expect_rc 2 "sweep bad point aligned" "$strata" sweep builtin:seed --set hardware.pcie.bandwidth=1GB/s,fast
python3 -c "
import csv,sys; rows=list(csv.reader(open(sys.argv[1]))); h=rows[0]
assert all(len(r)==len(h) for r in rows), [len(r) for r in rows]
assert rows[2][h.index('error')] != '' and rows[2][h.index('feasible')] == ''
" "$tmp/out" && echo "ok: sweep error row aligned" || { echo "FAIL: sweep error row"; cat "$tmp/out"; fails=$((fails + 1)); }

# sweep --plot: Y against X, one line per --hue value (a second --hue as the
# line style); a point that does not fit has no y (a cross). The plot's data sits beside it (.plot.json);
# the image needs strata-plot (built with the GUI), else a clear error.
plot_args=(sweep builtin:seed --set hardware.gpu.memory=1GiB,2MiB,8GiB --set hardware.pcie.bandwidth=1GB/s,4GB/s
           --plot "$tmp/study.png" hardware.gpu.memory iteration_time_s --hue hardware.pcie.bandwidth)
if [ -x "$(dirname "$strata")/../gui/strata-plot" ]; then
  expect_rc 1 "sweep --plot (with infeasible points)" "$strata" "${plot_args[@]}"
  head -c 8 "$tmp/study.png" | od -An -c | grep -q "P   N   G" && echo "ok: sweep --plot wrote a PNG" \
    || { echo "FAIL: sweep --plot PNG"; fails=$((fails + 1)); }
  expect_rc 0 "sweep --plot svg" "$strata" sweep builtin:seed --set hardware.pcie.bandwidth=1GB/s:8GB/s:*2 \
    --plot "$tmp/bw.svg" hardware.pcie.bandwidth samples_per_s
  grep -q "<svg" "$tmp/bw.svg" && echo "ok: sweep --plot wrote an SVG" || { echo "FAIL: sweep --plot SVG"; fails=$((fails + 1)); }
  python3 -c "import json,sys; p=json.load(open(sys.argv[1])); assert p['x_log'] is True and len(p['series'])==1 and len(p['series'][0]['points'])==4, p" \
    "$tmp/bw.plot.json" && echo "ok: geometric sweep on a log axis" || { echo "FAIL: bw.plot.json"; fails=$((fails + 1)); }
fi
# Without strata-plot (a copy of strata alone, PATH without it): exit 1,
# the tool named, the plot's data still written.
mkdir -p "$tmp/alone" && cp "$strata" "$tmp/alone/strata"
PATH=/usr/bin:/bin expect_rc 1 "sweep --plot without strata-plot" "$tmp/alone/strata" "${plot_args[@]}"
expect_grep "$tmp/err" "needs strata-plot" "sweep --plot names the missing tool"
python3 - "$tmp/study.plot.json" <<'PY' || fails=$((fails + 1))
import json, sys
p = json.load(open(sys.argv[1]))
# Keys in words, values as given.
assert [s["name"] for s in p["series"]] == ["PCIe bandwidth 1GB/s", "PCIe bandwidth 4GB/s"], p["series"]
pts = p["series"][0]["points"]
assert [q["label"] for q in pts] == ["2MiB", "1GiB", "8GiB"], pts   # ascending bytes
assert pts[0]["y"] is None and pts[1]["y"] > 0, pts                   # 2 MiB does not fit
assert p["y_unit"] == "s" and p["x_label"] == "GPU memory"
print("ok: sweep plot data (series per hue, infeasible without y)")
PY
# Two --hue keys: the first picks the colour, the second the line style.
PATH=/usr/bin:/bin "$tmp/alone/strata" sweep builtin:seed --set hardware.pcie.bandwidth=1GB/s,2GB/s \
  --set zero_optimization.offload_param.device=cpu,nvme --set zero_optimization.offload_optimizer.device=cpu,nvme \
  --plot "$tmp/hues.png" hardware.pcie.bandwidth samples_per_s --hue zero_optimization.offload_param.device \
  --hue zero_optimization.offload_optimizer.device >/dev/null 2>&1
python3 - "$tmp/hues.plot.json" <<'PY' || fails=$((fails + 1))
import json, sys
p = json.load(open(sys.argv[1]))
got = [(s["name"], s["color"], s["dash"]) for s in p["series"]]
assert got == [("parameters on cpu, optimizer states on cpu", 0, 0), ("parameters on cpu, optimizer states on nvme", 0, 1),
               ("parameters on nvme, optimizer states on cpu", 1, 0), ("parameters on nvme, optimizer states on nvme", 1, 1)], got
print("ok: a second hue is the line style")
PY
expect_rc 2 "sweep --plot unknown column" "$strata" sweep builtin:seed --set hardware.pcie.bandwidth=1GB/s,2GB/s \
  --plot "$tmp/x.png" hardware.pcie.bandwidth speed
expect_grep "$tmp/err" "not a result column (one of iteration_time_s" "unknown Y lists the columns"
expect_rc 2 "sweep --plot X not swept" "$strata" sweep builtin:seed --set hardware.pcie.bandwidth=1GB/s,2GB/s \
  --plot "$tmp/x.png" hardware.gpu.memory iteration_time_s
expect_rc 2 "sweep --plot with another varying key" "$strata" sweep builtin:seed --set hardware.pcie.bandwidth=1GB/s,2GB/s \
  --set training.micro_batch_size=1,2 --plot "$tmp/x.png" hardware.pcie.bandwidth iteration_time_s
expect_grep "$tmp/err" "training.micro_batch_size also varies" "the other varying key is named"

# The README's study (real HF config.json and ds_config): 20 feasible
# points; all-CPU offload does not depend on the NVMe, full ZeRO-Infinity
# gets faster with every doubling of it.
expect_rc 0 "README study sweep" "$strata" sweep "$src/scenarios/studies/llama2-13b-a100.yaml" \
  --zip hardware.nvme.read_bandwidth=1.6GB/s:25.6GB/s:*2 --zip hardware.nvme.write_bandwidth=1GB/s:16GB/s:*2 \
  --set zero_optimization.offload_param.device=cpu,nvme --set zero_optimization.offload_optimizer.device=cpu,nvme --json
python3 - "$tmp/out" <<'PY' || fails=$((fails + 1))
import json, sys
rows = json.load(open(sys.argv[1]))
assert len(rows) == 20 and all(r["feasible"] for r in rows), len(rows)
line = lambda p, o: [r["iteration_time_s"] for r in rows if r["set"]["zero_optimization.offload_param.device"] == p
                     and r["set"]["zero_optimization.offload_optimizer.device"] == o]
cpu = line("cpu", "cpu"); nvme = line("nvme", "nvme")
assert max(cpu) - min(cpu) < 1e-9 * max(cpu), cpu
assert all(a > b for a, b in zip(nvme, nvme[1:])), nvme
assert nvme[-1] > cpu[0], (nvme, cpu)
print("ok: README study rows")
PY
fi

if section limits; then
# Inputs that crashed, hung or overflowed (#19): each is exit 2 naming its
# key, within 5 s, under a 4 GiB address-space limit.
for kv in model.hidden_size=3e9 model.vocab_size=3e9 model.seq_length=3e9 hardware.gpus_per_node=1000000000 \
          model.layers=1000000000 training.gradient_accumulation_steps=2000000000 \
          zero_optimization.offload_param.buffer_count=2000000000 zero_optimization.offload_param.buffer_size=9e18 \
          hardware.gpu.peak_flops=1e308PFLOPS aio.intra_op_parallelism=100000 model.layers=100000 \
          hardware.pcie.bandwidth=1e300GB/s training.gradient_accumulation_steps=60000; do
  key=${kv%%=*}
  for cmd in estimate simulate; do
    ( capmem; timeout "$t5" "$strata" $cmd builtin:gpt-tiny --set "$kv" >"$tmp/out" 2>"$tmp/err" ); rc=$?
    if [ "$rc" -eq 2 ] && grep -q -- "$key" "$tmp/err"; then echo "ok: $cmd --set $kv refused"
    else echo "FAIL: $cmd --set $kv: exit $rc, want 2 naming $key"; head -3 "$tmp/err"; fails=$((fails + 1)); fi
  done
done
# The whole model too large, though each key is in range.
( capmem; timeout "$t5" "$strata" estimate builtin:gpt-tiny --set model.layers=4096 --set model.hidden_size=1048576 \
    --set model.num_heads=1024 >"$tmp/out" 2>"$tmp/err" ); rc=$?
[ "$rc" -eq 2 ] && grep -q "parameters; Strata's limit is 1e+15" "$tmp/err" && echo "ok: too many parameters refused" \
  || { echo "FAIL: too many parameters: exit $rc"; head -3 "$tmp/err"; fails=$((fails + 1)); }
printf 'model: {kind: mlp, sizes: [4294967296, 10]}\nhardware:\n  gpu: {memory: 1GiB, peak_flops: 1TFLOPS}\n  cpu: {memory: 8GiB}\n' > "$tmp/wide.yaml"
( capmem; timeout "$t5" "$strata" estimate "$tmp/wide.yaml" >"$tmp/out" 2>"$tmp/err" ); rc=$?
[ "$rc" -eq 2 ] && grep -q "model.sizes" "$tmp/err" && echo "ok: MLP width 4e9 refused" \
  || { echo "FAIL: MLP width 4e9: exit $rc"; head -3 "$tmp/err"; fails=$((fails + 1)); }

# A simulation past the op-instance limit is refused before it starts.
( capmem; timeout "$t5" "$strata" simulate builtin:gpt-1t-dgx2 --set hardware.gpus_per_node=1024 \
    --set hardware.cpu.memory=1000TiB >"$tmp/out" 2>"$tmp/err" ); rc=$?
[ "$rc" -eq 2 ] && grep -q "plan ops on 1024 simulated ranks); the limit is 10000000" "$tmp/err" \
  && echo "ok: simulation too large refused" || { echo "FAIL: simulation too large: exit $rc"; head -3 "$tmp/err"; fails=$((fails + 1)); }
# The limit is the user's: --max-op-instances lowers (and raises) it.
( capmem; timeout "$t5" "$strata" simulate builtin:seed --max-op-instances 10 >"$tmp/out" 2>"$tmp/err" ); rc=$?
[ "$rc" -eq 2 ] && grep -q "on 1 simulated ranks); the limit is 10 " "$tmp/err" && grep -q -- "--max-op-instances" "$tmp/err" \
  && echo "ok: --max-op-instances" || { echo "FAIL: --max-op-instances: exit $rc"; head -3 "$tmp/err"; fails=$((fails + 1)); }

# --jitter: Simulate's range [0, 0.5), NaN refused, before planning (exit 2);
# a replay's trace records the amount and seed it ran with.
for j in -0.1 0.5 nan; do expect_rc 2 "simulate --jitter $j" "$strata" simulate builtin:seed --jitter "$j"; done
expect_rc 2 "sweep --jitter 0.7" "$strata" sweep builtin:seed --set training.micro_batch_size=1,2 --jitter 0.7
expect_rc 0 "compare --jitter 0" "$strata" compare builtin:gpt-tiny --policies lru,belady --gpu-cache 4MiB --jitter 0
expect_rc 0 "simulate --jitter 0 --trace" "$strata" simulate builtin:seed --jitter 0 --jitter-seed 7 --trace "$tmp/j.json"
grep -q '"--jitter":"0","--jitter-seed":"7"' "$tmp/j.json" && echo "ok: the trace records the jitter" \
  || { echo "FAIL: the trace does not record the jitter"; fails=$((fails + 1)); }
# --stall-rate / --stall-time: finite and >= 0 (exit 2); with both on, every
# node is simulated, the report counts the stalls and the trace records them.
for v in "--stall-rate -1" "--stall-time nan" "--stall-rate inf"; do
  expect_rc 2 "simulate $v" "$strata" simulate builtin:seed $v
  grep -q "must be finite and >= 0" "$tmp/err" && echo "ok: $v named" || { echo "FAIL: $v: no range in the error"; fails=$((fails + 1)); }
done
expect_rc 0 "simulate with stalls" "$strata" simulate builtin:gpt-1t-512gpu --set model.layers=2 --stall-rate 100 \
  --stall-time 0.01 --json --trace "$tmp/st.json"
grep -q '"--stall-rate":"100","--stall-time":"0.01"' "$tmp/st.json" && echo "ok: the trace records the stalls" \
  || { echo "FAIL: the trace does not record the stalls"; fails=$((fails + 1)); }
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["simulated_ranks"]==j["world_size"]==512 and j["stalls"]>0, (j["simulated_ranks"],j["stalls"])' "$tmp/out" \
  && echo "ok: stalls simulate every node and are counted" || { echo "FAIL: stalls report"; fails=$((fails + 1)); }
# sweep and compare rows carry the stalls too: each row its count and
# seconds, the sweep's rows the settings (beside the jitter's), compare's
# text a line of counts; without stalls the counts are 0 and no setting.
expect_rc 0 "sweep with stalls" "$strata" sweep builtin:gpt-1t-512gpu --set model.layers=2 \
  --set training.micro_batch_size=1,2 --stall-rate 100 --stall-time 0.01 --json -j 2
python3 - "$tmp/out" <<'PY' || fails=$((fails + 1))
import json, sys
rows = json.load(open(sys.argv[1]))
assert len(rows) == 2, rows
for r in rows:
    assert r["stalls"] > 0 and abs(r["stalled_s"] - 0.01 * r["stalls"]) < 1e-9, r
    assert r["overrides"] == {"--jitter": "0.001", "--jitter-seed": "0", "--stall-rate": "100",
                              "--stall-time": "0.01"}, r["overrides"]
print("ok: sweep rows count their stalls and record the settings")
PY
expect_rc 0 "sweep csv without stalls" "$strata" sweep builtin:seed --set training.micro_batch_size=1,2
python3 - "$tmp/out" <<'PY' || fails=$((fails + 1))
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 2 and all(r["stalls"] == "0" and r["stalled_s"] == "0" and r["--jitter"] == "0.001" for r in rows), rows
assert "--stall-rate" not in rows[0], rows[0]
print("ok: sweep csv without stalls: 0 stalls, the jitter recorded, no stall setting")
PY
expect_rc 0 "compare with stalls" "$strata" compare builtin:gpt-1t-512gpu --set model.layers=2 --policies lru,fifo --gpu-cache 1GiB \
  --stall-rate 100 --stall-time 0.01 -j 2
expect_grep "$tmp/out" "^stalls (--stall-rate 100 per second of compute, --stall-time 0.01 s; all ranks): lru [1-9][0-9]* (.* s) fifo [1-9]" \
  "compare's text counts each policy's stalls"
expect_rc 0 "compare json with stalls" "$strata" compare builtin:gpt-1t-512gpu --set model.layers=2 --policies lru \
  --stall-rate 100 --stall-time 0.01 --json
python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))["lru"]; assert j["stalls"]>0 and j["stalled_s"]>0, j' "$tmp/out" \
  && echo "ok: compare json counts the stalls" || { echo "FAIL: compare json stalls"; fails=$((fails + 1)); }
fi
if section compare; then
# compare: on every shipped scenario (one policy: a row per policy is
# checked on the seed below, with every policy). gpt3-175b-3d with 8 of its
# 64 micro batches: its 168k-op plan, sent to the simulator's helper as
# JSON, took 45 s under ASan for one policy; it offloads nothing, so every
# policy's row is the same there.
for f in "$src"/scenarios/*.yaml; do
  fewer=()
  [ "$(basename "$f")" = gpt3-175b-3d.yaml ] && fewer=(--set training.gradient_accumulation_steps=8)
  expect_rc "$(fits "$f")" "compare $(basename "$f")" "$strata" compare "$f" --json --policies lru "${fewer[@]}"
done
expect_rc 0 "compare with caches" "$strata" compare builtin:seed --json --gpu-cache 3MiB --cpu-cache 3MiB
python3 - "$tmp/out" <<'PY' || fails=$((fails + 1))
import json, sys
j = json.load(open(sys.argv[1]))
assert sorted(j) == ["belady", "cost_aware", "fifo", "lfu", "lru"], sorted(j)
for p, r in j.items():
    for k in ("h2d", "d2h", "nvme_read", "nvme_write"):
        assert isinstance(r["bytes"][k], int), (p, k)
    for t in ("gpu", "cpu"):
        assert 0 <= r["hit_ratio"][t] <= 1, (p, t)
    assert r["iteration_time_s"] > 0 and r["traffic_over_lower_bound"] >= 1.0, p
    for t in ("gpu", "cpu", "nvme"):
        assert isinstance(r["peak_bytes"][t], int)
assert j["belady"]["bytes"]["nvme_read"] <= j["lru"]["bytes"]["nvme_read"]
print("ok: compare --json schema")
PY
expect_rc 2 "compare unknown policy" "$strata" compare builtin:seed --policies lru,arc
expect_grep "$tmp/err" "unknown policy 'arc'" "names the policy"
expect_rc 2 "compare without a cache refuses: every policy would plan the same" "$strata" compare builtin:seed
expect_grep "$tmp/err" "every eviction policy plans the same; give one, e.g. --gpu-cache" "and says what to give"
expect_rc 0 "compare text" "$strata" compare builtin:seed --policies fifo --set policy.gpu_cache=4MiB
expect_grep "$tmp/out" "traffic/LB" "compare table"
fi

if section run; then
# -o for simulate and run; run --seed: the same seed, the same weights.
expect_rc 0 "simulate -o" "$strata" simulate builtin:seed -o "$tmp/sim.txt"
expect_grep "$tmp/sim.txt" "iteration time" "simulate's report in the file"
expect_rc 0 "run -o --seed 7" "$strata" run builtin:seed --steps 2 --seed 7 --json -o "$tmp/run7a.json" --nvme-dir "$tmp/seed"
expect_rc 0 "run --seed 7 again" "$strata" run builtin:seed --steps 2 --seed 7 --json -o "$tmp/run7b.json" --nvme-dir "$tmp/seed"
expect_rc 0 "run --seed 8" "$strata" run builtin:seed --steps 2 --seed 8 --json -o "$tmp/run8.json" --nvme-dir "$tmp/seed"
python3 - "$tmp/run7a.json" "$tmp/run7b.json" "$tmp/run8.json" <<'PY' || fails=$((fails + 1))
import json, sys
a, b, c = (json.load(open(f))["weights_digest"] for f in sys.argv[1:])
assert a == b and a != c, (a, b, c)
print("ok: run --seed sets the weights")
PY
# validate: exit 1 beyond --tolerance (no error is 0%), 0 within it.
expect_rc 1 "validate beyond --tolerance 0" "$strata" validate builtin:seed --steps 2 --tolerance 0 --nvme-dir "$tmp/val"
expect_grep "$tmp/err" "beyond --tolerance 0%; exit 1" "validate says why it fails"
expect_rc 0 "validate within a wide --tolerance" "$strata" validate builtin:seed --steps 2 --tolerance 1e9 --nvme-dir "$tmp/val" --json
expect_grep "$tmp/out" '"within_tolerance": true' "validate reports the tolerance"
# run: executes the seed for real; JSON fields; trace in the timeline format.
expect_rc 0 "run --json" "$strata" run builtin:seed --steps 3 --json --nvme-dir "$tmp/nvme" --trace "$tmp/run.trace.json"
python3 - "$tmp/out" "$tmp/run.trace.json" <<'PY' || fails=$((fails + 1))
import json, sys
j = json.load(open(sys.argv[1]))
assert len(j["losses"]) == 3 and j["iteration_time_s"] > 0
# The mean leaves the first step out: a warm-up.
assert len(j["step_time_s"]) == 3 and abs(sum(j["step_time_s"][1:]) / 2 - j["iteration_time_s"]) < 1e-9
for c in ("h2d", "d2h", "nvme_read", "nvme_write"):
    assert j["bytes_moved"][c] > 0, c
    # Per step: the run's total over its 3 steps (the same plan each).
    assert j["bytes_moved_per_step"][c] == j["bytes_moved"][c] // 3, c
for t in ("gpu", "cpu", "nvme"):
    assert j["peak_bytes"][t] > 0, t
assert len(j["weights_digest"]) == 64
t = json.load(open(sys.argv[2]))
assert t["otherData"]["source"] == "run" and len(t["traceEvents"]) > 0
print("ok: run --json and trace")
PY
expect_rc 0 "run with io_uring" "$strata" run builtin:seed --steps 3 --json --engine io_uring --nvme-dir "$tmp/nvme"
expect_rc 0 "run text" "$strata" run builtin:seed --steps 2 --nvme-dir "$tmp/nvme"
expect_grep "$tmp/out" "(warm-up)" "run marks the warm-up step"
expect_grep "$tmp/out" "mean of the steps after the warm-up" "run's mean leaves the warm-up out"
# A Hugging Face Llama config: estimated and simulated; run says the
# executor computes GPT-2's architecture only (bad input, exit 2).
printf 'model: {kind: transformer, hf_config: %s/scenarios/models/llama-2-7b.json, seq_length: 512}\nhardware:\n  gpu: {memory: 80GiB, peak_flops: 312TFLOPS}\n  cpu: {memory: 512GiB}\nzero_optimization: {stage: 3, offload_optimizer: {device: cpu}, offload_param: {device: cpu}}\n' "$src" >"$tmp/llama.yaml"
expect_rc 0 "estimate a Llama config" "$strata" estimate "$tmp/llama.yaml"
expect_grep "$tmp/out" "6.74 G parameters" "Llama-2-7B's published count"
expect_rc 0 "simulate a Llama config" "$strata" simulate "$tmp/llama.yaml"
expect_rc 2 "run a Llama config" "$strata" run "$tmp/llama.yaml" --steps 1
expect_grep "$tmp/err" "planned and simulated only" "run names what it computes"
expect_rc 2 "run with a bad engine" "$strata" run builtin:seed --engine floppy
: >"$tmp/plainfile"
expect_rc 1 "run into an unwritable nvme dir" "$strata" run builtin:seed --nvme-dir "$tmp/plainfile/nvme"
expect_grep "$tmp/err" "$tmp/plainfile/nvme" "names the path"
# System trees are refused before anything is written (core/paths.h).
expect_rc 2 "run into a system directory" "$strata" run builtin:seed --nvme-dir /etc/strata_no
expect_grep "$tmp/err" "the swap directory '/etc/strata_no' is a system location" "says why"
[ ! -e /etc/strata_no ] && echo "ok: nothing created in /etc" || { echo "FAIL: /etc/strata_no created"; fails=$((fails + 1)); }
expect_rc 2 "checkpoints into a system directory" "$strata" run builtin:seed --steps 2 --nvme-dir "$tmp/nvme" \
  --save-every 1 --checkpoint-dir /usr/strata_no
expect_grep "$tmp/err" "the checkpoint directory '/usr/strata_no' is a system location" "says which directory"
# Losses stream as the steps end: on stderr under --json (stdout is the one
# JSON document), on stdout otherwise.
expect_rc 0 "run --json streams losses" "$strata" run builtin:seed --steps 2 --json --nvme-dir "$tmp/nvme"
expect_grep "$tmp/err" "^step 2  loss" "losses on stderr under --json"
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmp/out" || { echo "FAIL: --json stdout is not one document"; fails=$((fails + 1)); }
# device nvme without any nvme_path: refused, as DeepSpeed refuses it.
"$strata" scenarios seed | sed 's/nvme_path: [^,]*, //' >"$tmp/nopath.yaml"
expect_rc 2 "device nvme without nvme_path" "$strata" run "$tmp/nopath.yaml" --steps 1
expect_grep "$tmp/err" "no directory is given for its swap file" "says what is missing"
# A swap file past the file-size limit (ulimit -f): an error naming the
# file (EFBIG), exit 1, no swap files left (SIGXFSZ would have killed it).
# 6 MiB: below the 8 MB moments file, above what Open MPI's PMIx maps.
(ulimit -f 6144; exec "$strata" run builtin:seed --steps 1 --nvme-dir "$tmp/fsz") >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 1 ] && grep -q "File too large" "$tmp/err" && [ -z "$(ls -d "$tmp/fsz"/strata-rank0.run-* 2>/dev/null)" ]; then
  echo "ok: a swap file past the file-size limit"
else
  echo "FAIL: file-size limit: exit $rc"; cat "$tmp/err"; fails=$((fails + 1))
fi
# SIGINT and SIGTERM stop at the next op: exit 130/143, the swap files gone,
# the losses so far printed. A second run on a busy nvme dir is refused
# with the holder's pid.
for sig in INT TERM; do
  # The background job truncates its output files itself, after this shell
  # has gone on: the previous run's "step 3" must not be there to be found
  # (it was, and the signal came before strata had started: killed with no
  # message, exit 143).
  rm -f "$tmp/sig.out" "$tmp/sig.err"
  "$strata" run builtin:seed --steps 5000 --nvme-dir "$tmp/sig" >"$tmp/sig.out" 2>"$tmp/sig.err" &
  job=$!
  for _ in $(seq 1 300); do grep -q "^step 3 " "$tmp/sig.out" 2>/dev/null && break; sleep 0.1; done
  if [ "$sig" = INT ]; then
    expect_rc 1 "a second run on the same nvme dir" "$strata" run builtin:seed --steps 1 --nvme-dir "$tmp/sig"
    expect_grep "$tmp/err" "strata-rank0.lock' is locked by another run (process $job)" "the holder is named"
  fi
  kill -$sig "$job"
  wait "$job"
  rc=$?
  want=$([ "$sig" = INT ] && echo 130 || echo 143)
  left=$(ls -d "$tmp/sig"/strata-rank0.run-* 2>/dev/null)
  if [ "$rc" -eq "$want" ] && [ -z "$left" ] && grep -q "stopped by SIG$sig" "$tmp/sig.err"; then
    echo "ok: SIG$sig stops the run cleanly (exit $rc)"
  else
    echo "FAIL: SIG$sig: exit $rc (want $want), left: $left"; cat "$tmp/sig.err"; fails=$((fails + 1))
    [ -d "$tmp" ] || echo "  (the test's own directory $tmp is gone: removed by another process)"
  fi
done
fi

if section calibrate; then
# calibrate: measures here, writes a hardware section the other commands take.
expect_rc 0 "calibrate" "$strata" calibrate builtin:seed --nvme-dir "$tmp/calib" -o "$tmp/hw.yaml"
expect_grep "$tmp/err" "calibrating: 100% done" "progress shown"
expect_grep "$tmp/hw.yaml" "read_bandwidth" "hardware yaml written"
expect_rc 0 "simulate with calibrated hardware" "$strata" simulate builtin:seed --hardware "$tmp/hw.yaml" --json
printf 'hardware:\n  gpu: {memory: 1GiB, peak_flops: fast}\n  cpu: {memory: 1GiB}\n' >"$tmp/badhw.yaml"
expect_rc 2 "bad hardware file" "$strata" estimate --hardware "$tmp/badhw.yaml"
expect_grep "$tmp/err" "badhw.yaml:2:35: hardware.gpu.peak_flops" "error located in the hardware file"

# --backend cuda: where there is no device (or the build has no backend) a
# clear error, exit 1, before any work; with a device, run and calibrate go
# on (scripts/gpu-check.sh checks what they compute).
"$strata" run builtin:seed --steps 2 --backend cuda --nvme-dir "$tmp/cuda" >"$tmp/out" 2>"$tmp/err"
rc=$?
if grep -q "no CUDA device" "$tmp/err"; then
  [ "$rc" -eq 1 ] && echo "ok: run --backend cuda without a device: exit 1" ||
    { echo "FAIL: run --backend cuda without a device: exit $rc"; fails=$((fails + 1)); }
  expect_rc 1 "calibrate --backend cuda without a device" "$strata" calibrate builtin:seed --backend cuda --nvme-dir "$tmp/calib"
  expect_grep "$tmp/err" "no CUDA device" "calibrate says why"
  expect_rc 1 "validate --backend cuda without a device" "$strata" validate builtin:seed --backend cuda --nvme-dir "$tmp/cuda"
else
  [ "$rc" -eq 0 ] && echo "ok: run --backend cuda on a device" ||
    { echo "FAIL: run --backend cuda on a device: exit $rc"; cat "$tmp/err"; fails=$((fails + 1)); }
fi
# --backend emulated: the device model's logic on the host; calibrate
# measures its copies and Adam through the backend.
expect_rc 0 "run --backend emulated" "$strata" run builtin:seed --steps 2 --backend emulated --nvme-dir "$tmp/emu"
expect_rc 0 "calibrate --backend emulated" "$strata" calibrate builtin:seed --backend emulated --nvme-dir "$tmp/calib" -o "$tmp/hw2.yaml"
expect_grep "$tmp/err" "emulated: H2D .* GB/s, D2H .* GB/s" "calibrate reports the device's copies"
expect_grep "$tmp/hw2.yaml" "backend emulated" "the hardware file names the backend"

fi

if section tune; then
# framework: fsdp tunes FSDP2's own knobs and writes no DeepSpeed config.
printf 'model: {kind: transformer, layers: 2, hidden_size: 64, num_heads: 4}\nhardware: {gpus_per_node: 2, gpu: {memory: 1GiB, peak_flops: 1TFLOPS, efficiency: 1.0}, cpu: {memory: 8GiB}}\nframework: fsdp\n' >"$tmp/fsdp-tune.yaml"
expect_rc 0 "tune of framework: fsdp" "$strata" tune "$tmp/fsdp-tune.yaml" --budget 6 -j 2 -o "$tmp/fsdp-tune"
expect_grep "$tmp/out" "fsdp.reshard_after_forward" "tunes FSDP2's knobs"
[ ! -e "$tmp/fsdp-tune/ds_config.json" ] && echo "ok: no ds_config.json for fsdp" || { echo "FAIL: ds_config.json for fsdp"; fails=$((fails + 1)); }
expect_rc 0 "the fsdp tune's scenario.yaml simulates" "$strata" simulate "$tmp/fsdp-tune/scenario.yaml"
# tune: a faster point than the scenario as given, found by simulation.
expect_rc 0 "tune" "$strata" tune builtin:seed --budget 12 -j 2
expect_grep "$tmp/out" "^best: .* samples/s.*x the start" "names the best point against the start"
expect_grep "$tmp/out" "^Pareto front" "prints the front"
expect_grep "$tmp/err" "strata tune: [0-9]* simulated" "progress on stderr"
# The same points, in the same order, under one seed whatever the jobs.
"$strata" tune builtin:seed --budget 12 --seed 3 -j 1 --json >"$tmp/t1.json" 2>/dev/null
"$strata" tune builtin:seed --budget 12 --seed 3 -j 2 --json >"$tmp/t2.json" 2>/dev/null
python3 - "$tmp/t1.json" "$tmp/t2.json" <<'PY' || fails=$((fails + 1))
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
for r in (a, b):
    r.pop("seconds")
assert a == b, "tune's points differ between -j 1 and -j 2"
assert 0 < a["simulations"] <= 12, a["simulations"]
print("ok: tune is deterministic under a seed, whatever the jobs")
PY
# -o DIR: the best point as a DeepSpeed config and a scenario; both give
# back the best point's figure exactly, with strata simulate.
expect_rc 0 "tune -o" "$strata" tune builtin:seed --budget 10 --json -o "$tmp/tuned"
python3 - "$strata" "$tmp/out" "$tmp/tuned" <<'PY' || fails=$((fails + 1))
import csv, json, subprocess, sys
strata, out, d = sys.argv[1:]
best = json.load(open(out))["best"]["samples_per_s"]
def simulated(*args):
    r = subprocess.run([strata, "simulate", *args, "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["samples_per_s"]
assert simulated(f"{d}/scenario.yaml") == best, "scenario.yaml does not give the best point's figure"
assert simulated("builtin:seed", "--deepspeed", f"{d}/ds_config.json") == best, "ds_config.json does not"
rows = list(csv.DictReader(open(f"{d}/front.csv")))
assert rows and any(r["on_front"] == "true" for r in rows), "front.csv has no front"
assert {r["verdict"] for r in rows} <= {"runs", "refused", "does_not_fit", "failed"}
print("ok: tune -o writes a config and a scenario that reproduce the best point")
PY
# front.png: the scatter of time against GPU memory, drawn by strata-plot
# where the GUI is built (its data beside it either way).
if [ -x "$(dirname "$strata")/../gui/strata-plot" ]; then
  python3 -c "import struct, sys; b = open(sys.argv[1], 'rb').read(24); assert b[:8] == b'\x89PNG\r\n\x1a\n' and struct.unpack('>I', b[16:20])[0] >= 800" \
    "$tmp/tuned/front.png" || { echo "FAIL: tune -o: front.png is not a picture"; fails=$((fails + 1)); }
fi
python3 - "$tmp/tuned/front.plot.json" <<'PY' || fails=$((fails + 1))
import json, sys
p = json.load(open(sys.argv[1]))
names = [s["name"] for s in p["series"]]
assert p["x_unit"] == "B" and p["y_unit"] == "s", p
assert "best" in names and len(next(s for s in p["series"] if s["name"] == "best")["points"]) == 1, names
print("ok: tune -o draws the front")
PY
# --objective cost: samples per dollar, which favours fewer GPUs where more
# do not pay for themselves; it needs the GPU-hour price.
"$strata" tune builtin:seed --only --search hardware.nodes=1,2 --budget 8 --json \
  --objective cost --gpu-hour-price 2 >"$tmp/tc.json" 2>/dev/null
python3 - "$tmp/tc.json" <<'PY' || fails=$((fails + 1))
import json, sys
j = json.load(open(sys.argv[1]))
for p in j["points"]:
    if p["simulated"]:
        assert p["gpus"] == int(p["settings"]["hardware.nodes"]), p  # the seed: 1 GPU per node
        want = p["samples_per_s"] * 3600 / (p["gpus"] * 2)
        assert abs(p["objective"] - want) <= 1e-9 * want, (p, want)
best = max((p for p in j["points"] if p["simulated"]), key=lambda p: p["objective"])
assert j["best"]["settings"] == best["settings"]
print("ok: tune --objective cost ranks by samples per dollar")
PY
# Pruning never discards a point that runs: every point of a small space,
# given to strata simulate, exits 0 exactly when tune simulated it (1 when
# it did not fit, 2 when refused).
"$strata" tune builtin:seed --only --search zero_optimization.stage=0,1,2,3 \
  --search zero_optimization.offload_param.device=none,cpu,nvme \
  --search zero_optimization.offload_optimizer.device=none,cpu,nvme \
  --search hardware.gpu.memory=5MiB,64MiB --budget 100 --json >"$tmp/t3.json" 2>/dev/null
python3 - "$strata" "$tmp/t3.json" <<'PY' || fails=$((fails + 1))
import json, subprocess, sys
strata, path = sys.argv[1:]
points = json.load(open(path))["points"]
kinds = set()
for p in points:
    sets = [a for k, v in p["settings"].items() for a in ("--set", f"{k}={v}")]
    rc = subprocess.call([strata, "simulate", "builtin:seed", *sets], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    want = 0 if p["simulated"] else 2 if p["refused"] else 1
    assert rc == want, f"{p['settings']}: simulate exits {rc}, tune says {want}"
    kinds.add(want)
assert kinds == {0, 1, 2}, f"the space should hold points that run, do not fit and are refused: {kinds}"
print(f"ok: tune's {len(points)} verdicts match strata simulate's")
PY
# The other methods: random points, the same under a seed whatever the
# jobs; the bound-first method simulates in order of the resource bound,
# which is at most the simulated time (a lower bound).
"$strata" tune builtin:seed --method random --budget 6 --seed 2 -j 1 --json >"$tmp/r1.json" 2>/dev/null
"$strata" tune builtin:seed --method random --budget 6 --seed 2 -j 2 --json >"$tmp/r2.json" 2>/dev/null
"$strata" tune builtin:seed --method bound --only --search zero_optimization.stage=0,1,2,3 \
  --search zero_optimization.offload_param.device=none,cpu,nvme \
  --search zero_optimization.offload_optimizer.device=none,cpu,nvme --budget 5 --json >"$tmp/b.json" 2>/dev/null
python3 - "$tmp/r1.json" "$tmp/r2.json" "$tmp/b.json" <<'PY' || fails=$((fails + 1))
import json, sys
r1, r2, b = (json.load(open(p)) for p in sys.argv[1:])
assert [p["settings"] for p in r1["points"]] == [p["settings"] for p in r2["points"]], "random: -j changes the points"
assert r1["simulations"] == 6
ran = [p for p in b["points"] if p["simulated"]]
assert len(ran) == 5 and b["simulations"] == 5, b["simulations"]
bounds = [p["bound_s"] for p in ran[1:]]  # the start first, then least bound first
assert bounds == sorted(bounds), bounds
assert all(0 < p["bound_s"] <= p["iteration_time_s"] * (1 + 1e-9) for p in ran), "the bound exceeds the simulation"
print("ok: tune --method random is deterministic; --method bound goes least bound first")
PY
expect_rc 2 "tune --method bound over the whole default space" "$strata" tune builtin:seed --method bound
expect_grep "$tmp/err" "plans every point" "says the space is too large"
# --repair: a config DeepSpeed refuses, mended with one change, said with
# the refusal it removes; a scenario that runs needs none.
expect_rc 0 "tune --repair" "$strata" tune builtin:seed --repair --set zero_optimization.offload_param.buffer_size=1000
expect_grep "$tmp/out" "^repaired with 1 change" "one change"
expect_grep "$tmp/out" "without it: refused: DeepSpeed would refuse this config \[buffer_size_too_small\]" "the check that forced it"
expect_grep "$tmp/out" "^  zero_optimization.offload_param.buffer_size: 1000 -> " "the other one-key repairs, the buffer among them"
expect_rc 0 "tune --repair of a scenario that runs" "$strata" tune builtin:seed --repair
expect_grep "$tmp/out" "runs as given" "says it runs as given"
# Bad input exits 2 and names it; a space where nothing fits exits 1 with
# the closest point.
expect_rc 2 "tune: a key that does not exist" "$strata" tune builtin:seed --search nokey.x=1,2
expect_grep "$tmp/err" "unknown key 'nokey'" "names the key"
expect_rc 2 "tune: a range with no accepted value" "$strata" tune builtin:seed --search zero_optimization.stage=5,6
expect_grep "$tmp/err" "no value is accepted" "says no value is accepted"
expect_rc 2 "tune: --fix the scenario refuses" "$strata" tune builtin:seed --fix zero_optimization.stage=7
expect_rc 2 "tune: --only without --search" "$strata" tune builtin:seed --only
expect_rc 2 "tune: cost without a price" "$strata" tune builtin:seed --objective cost
expect_grep "$tmp/err" "needs --gpu-hour-price" "names the missing price"
expect_rc 1 "tune: nothing fits" "$strata" tune builtin:seed --fix hardware.gpu.memory=2MiB --budget 5
expect_grep "$tmp/err" "the closest point" "shows the closest point"
expect_grep "$tmp/err" "over by" "with its violation"
fi
echo "$fails failure(s)"
[ "$fails" -eq 0 ]
