#!/usr/bin/env bash
# `mpirun strata run` with tensor and pipeline parallelism (issue #16).
# Pipeline: each stage's ranks run its layers and send the boundary
# activations and gradients (MPI point to point); ZeRO partitions over each
# stage's data-parallel group. Tensor: each rank holds its shard
# of every layer (column- then row-parallel pairs, core/model.cc BuildMlp)
# and the plan's all-reduces sum the partial outputs and input gradients in
# the tensor-parallel group. The GPT: heads, fc1's rows and the matching
# columns of the projections, the token table's rows (vocabulary-parallel
# embedding and cross-entropy).
#  - A pipeline computes what one stage computes, bit for bit (fp32
#    boundary tensors, the same micro-step order in 1F1B's backward): MLP
#    digest and losses equal to pipeline 1's, with one and two data-parallel
#    ranks, ZeRO 0 and 1, the optimizer on the GPU or the CPU.
#  - Tensor parallelism sums each split dot product in two parts (and a
#    row-parallel layer adds its bias after the sum), and the GPT's pipeline
#    its tied token table's gradient per stage over the micro steps, then
#    between the stages: rounding differs. Tolerance over 20 steps (the
#    MLP) or 10 steps of 2 micro batches (the GPT): every loss within 1e-4
#    relative of the T = P = 1 run's in 16-bit precision (measured: MLP
#    T=2 fp16 8.3e-7, GPT T=2 bf16 1.3e-6, GPT P=2 bf16 5.6e-6), 1e-6 in
#    fp32 (measured: MLP 5.3e-8, GPT T=2 1.0e-7, P=2 5.2e-8).
#  - mpirun -np 4 with (T=2, P=1), (T=1, P=2) and (T=2, P=2) under ZeRO-1:
#    the loss falls over 20 steps and the digest is the same twice.
#  - The device model (--backend emulated): the MLP's pipeline bit for bit,
#    T=2 within tolerance, T=2 x P=2 equal to T=2; the GPT's T=2 and P=2
#    within tolerance.
# Usage: model_parallel_test.sh STRATA_BINARY WORK_DIR [SECTION]
# Without SECTION every section runs; CTest runs each as its own test
# (model_parallel_test.SECTION), in a work directory of its own.
set -u
strata=$1
only=${3:-}
sections="mlp-pipeline mlp-tensor mlp-4-ranks device-model gpt gpt-device-model gpt-4-ranks refused"
[ -z "$only" ] || case " $sections " in *" $only "*) ;; *) echo "model_parallel_test.sh: no section '$only' (one of: $sections)"; exit 2 ;; esac
section() { [ -z "$only" ] || [ "$only" = "$1" ]; }
work=$2/model_parallel_test${only:+.$only}
rm -rf "$work"
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
here=$(cd "$(dirname "$0")/../.." && pwd)
gpt="$here/scenarios/gpt-tiny.yaml"
fails=0
# run NP SCENARIO STEPS [--set ...]: "digest loss loss ..."
run() {
  local np=$1 scenario=$2 steps=$3
  shift 3
  mpirun -np "$np" "$strata" run "$scenario" --steps "$steps" --json --set zero_optimization.offload_param.device=none \
    --set zero_optimization.offload_optimizer.device=none --set hardware.gpu.memory=8GiB "$@" 2>"$work/err" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["weights_digest"], " ".join(repr(x) for x in d["losses"]))'
}
same() {  # same WHAT A B
  if [ -n "$2" ] && [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAIL: $1: '$2' != '$3'"; cat "$work/err"; fails=$((fails + 1)); fi
}
# close WHAT TOL REF RUN: every loss of RUN within TOL (relative) of REF's (as many), and RUN's falls.
close() {
  if python3 - "$2" "$3" "$4" <<'PY'
import sys
tol = float(sys.argv[1])
ref, run = [list(map(float, s.split()[1:])) for s in sys.argv[2:4]]
assert len(ref) == len(run) >= 10, (len(ref), len(run))
worst = max(abs(a - b) / a for a, b in zip(ref, run))
print("   losses %.4f -> %.4f, worst relative difference %.2g (tolerance %g)" % (run[0], run[-1], worst, tol))
assert worst <= tol and run[-1] < run[0]
PY
  then echo "ok: $1"; else echo "FAIL: $1"; cat "$work/err"; fails=$((fails + 1)); fi
}
falls() {  # falls WHAT RUN: 20 losses, the last three's mean below the first
  if python3 -c 'import sys; l=list(map(float, sys.argv[1].split()[1:])); assert len(l) == 20 and sum(l[-3:]) / 3 < l[0], l' "$2"
  then echo "ok: $1: the loss falls"; else echo "FAIL: $1: the loss does not fall: $2"; fails=$((fails + 1)); fi
}

mlp="--set training.gradient_accumulation_steps=4"
z1="--set zero_optimization.stage=1 --set training.gradient_accumulation_steps=2"
if section mlp-pipeline; then
for z in 0 1; do
  same "MLP ZeRO $z: P=2 equals P=1" "$(run 2 builtin:seed 3 $mlp --set zero_optimization.stage=$z --set parallelism.pipeline=2)" \
    "$(run 1 builtin:seed 3 $mlp --set zero_optimization.stage=$z)"
done
dp=$(run 2 builtin:seed 3 $mlp --set zero_optimization.stage=1)
same "MLP ZeRO 1, optimizer on cpu: P=2 x DP=2 equals DP=2" \
  "$(run 4 builtin:seed 3 $mlp --set zero_optimization.stage=1 --set parallelism.pipeline=2 --set zero_optimization.offload_optimizer.device=cpu)" "$dp"

fi
if section mlp-tensor; then
# Tensor parallelism against one rank, 20 steps, fp16 (the seed's) and fp32.
for prec in fp32 fp16; do
  tol=$([ $prec = fp32 ] && echo 1e-6 || echo 1e-4)
  t2=$(run 2 builtin:seed 20 $z1 --set training.precision=$prec --set parallelism.tensor=2)
  close "MLP $prec T=2: losses match T=1 within $tol" "$tol" "$(run 1 builtin:seed 20 $z1 --set training.precision=$prec)" "$t2"
done
# Offload works as before: ZeRO-3 with parameters and optimizer states on
# NVMe (the seed's placement) gives the digest of everything on the GPU.
gpu=$(run 2 builtin:seed 4 --set parallelism.tensor=2)
nvme=$(mpirun -np 2 "$strata" run builtin:seed --steps 4 --json --nvme-dir "$work/nvme" --set parallelism.tensor=2 2>"$work/err" |
  python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["weights_digest"], " ".join(repr(x) for x in d["losses"]))')
same "MLP T=2 ZeRO-3, params and optimizer on NVMe: the digest of everything on the GPU" "$nvme" "$gpu"
fi
if section mlp-4-ranks; then
# T=2 on 2 ranks in the seed's fp16, which T=2 x P=2 must equal.
[ -n "${t2:-}" ] || t2=$(run 2 builtin:seed 20 $z1 --set training.precision=fp16 --set parallelism.tensor=2)
# The three 4-rank layouts, twice each; T=2 x P=2 computes what T=2 does.
for layout in "2 1" "1 2" "2 2"; do
  set -- $layout
  what="MLP mpirun -np 4 T=$1 P=$2 ZeRO-1"
  a=$(run 4 builtin:seed 20 $z1 --set parallelism.tensor=$1 --set parallelism.pipeline=$2)
  same "$what: deterministic" "$(run 4 builtin:seed 20 $z1 --set parallelism.tensor=$1 --set parallelism.pipeline=$2)" "$a"
  falls "$what" "$a"
  [ "$layout" = "2 2" ] && same "$what equals T=2 on 2 ranks" "$a" "$t2"
done
fi

if section device-model; then
# The device model (--backend emulated: the CUDA backend's model logic, its
# kernels emulated by host loops): the pipeline bit for bit, T=2 within the
# same tolerances (measured over 20 steps: fp32 1.1e-7, fp16 3.7e-6), and
# T=2 x P=2 equal to T=2.
dev="--backend emulated --set training.gradient_accumulation_steps=2 --set zero_optimization.stage=1"
same "device model: P=2 equals P=1" "$(run 2 builtin:seed 3 $dev --set parallelism.pipeline=2)" "$(run 1 builtin:seed 3 $dev)"
for prec in fp32 fp16; do
  tol=$([ $prec = fp32 ] && echo 1e-6 || echo 1e-4)
  dt2=$(run 2 builtin:seed 20 $dev --set training.precision=$prec --set parallelism.tensor=2)
  close "device model $prec T=2: losses match T=1 within $tol" "$tol" "$(run 1 builtin:seed 20 $dev --set training.precision=$prec)" "$dt2"
done
same "device model T=2 x P=2 equals T=2" "$(run 4 builtin:seed 20 $dev --set parallelism.tensor=2 --set parallelism.pipeline=2)" "$dt2"
fi

if section gpt; then
# GPT: T=2 (heads, fc1 rows, vocabulary-parallel table and loss; 256 tokens
# need no padding at T=2) and P=2 against one rank, 10 steps of 2 micro
# batches.
for prec in bf16 fp32; do
  tol=$([ $prec = fp32 ] && echo 1e-6 || echo 1e-4)
  opts="--set training.gradient_accumulation_steps=2 --set zero_optimization.stage=1 --set training.precision=$prec"
  ref=$(run 1 "$gpt" 10 $opts)
  for par in tensor pipeline; do
    got=$(run 2 "$gpt" 10 $opts --set parallelism.$par=2)
    [ $prec = bf16 ] && same "GPT $prec $par 2: deterministic" "$(run 2 "$gpt" 10 $opts --set parallelism.$par=2)" "$got"
    close "GPT $prec $par 2: losses match one rank's within $tol" "$tol" "$ref" "$got"
  done
done
fi
if section gpt-device-model; then
# The GPT on the device model (--backend emulated): T=2 and P=2 against one
# rank, bf16, over 10 steps of 2 micro batches (measured: tensor 1.4e-5,
# pipeline 1.2e-5).
opts="--backend emulated --set training.gradient_accumulation_steps=2 --set zero_optimization.stage=1"
ref=$(run 1 "$gpt" 10 $opts)
for par in tensor pipeline; do
  close "device model GPT bf16 $par 2: losses match one rank's within 1e-4" 1e-4 "$ref" "$(run 2 "$gpt" 10 $opts --set parallelism.$par=2)"
done
fi
if section gpt-4-ranks; then
what="GPT mpirun -np 4 T=2 P=2 ZeRO-1, optimizer on cpu"
g4=$(run 4 "$gpt" 20 --set zero_optimization.stage=1 --set parallelism.tensor=2 --set parallelism.pipeline=2 \
  --set zero_optimization.offload_optimizer.device=cpu)
same "$what: deterministic" "$(run 4 "$gpt" 20 --set zero_optimization.stage=1 --set parallelism.tensor=2 \
  --set parallelism.pipeline=2 --set zero_optimization.offload_optimizer.device=cpu)" "$g4"
falls "$what" "$g4"
fi

if section refused; then
# Refused with the reason, exit 2.
refused() {  # refused WHAT PATTERN NP ARGS...
  local what=$1 pattern=$2 np=$3
  shift 3
  mpirun -np "$np" "$strata" run "$@" --steps 2 --set zero_optimization.offload_param.device=none \
    --set zero_optimization.offload_optimizer.device=none >/dev/null 2>"$work/err"
  local rc=$?
  if [ $rc -eq 2 ] && grep -q "$pattern" "$work/err"; then echo "ok: $what refused (exit 2)"; else
    echo "FAIL: $what: exit $rc"; cat "$work/err"; fails=$((fails + 1)); fi
}
for par in tensor pipeline; do
  refused "--save-every with $par 2" "checkpoints .* of tensor- or pipeline-parallel runs are not written yet" 2 builtin:seed \
    --set zero_optimization.stage=1 --set parallelism.$par=2 --save-every 1 --checkpoint-dir "$work/ck"
done
refused "partitioned activations with tensor 2" "partition_activations: strata run executes tensor parallelism with whole" \
  2 "$gpt" --set zero_optimization.stage=1 --set parallelism.tensor=2 --set training.partition_activations=true
fi
rm -rf "$work"
[ "$fails" -eq 0 ]
