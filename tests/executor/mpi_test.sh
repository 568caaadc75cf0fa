#!/usr/bin/env bash
# `mpirun -np 2 strata run`: two MPI ranks train the seed MLP with ZeRO stage 3;
# every placement of parameters and optimizer states gives the weights digest
# of the run with everything in device memory.
# Usage: mpi_test.sh STRATA_BINARY WORK_DIR
set -u
strata=$1
work=$2/mpi_test
rm -rf "$work"
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
digest() {  # digest PARAM_DEVICE OPTIM_DEVICE
  mpirun -np 2 "$strata" run builtin:seed --steps 3 --json --nvme-dir "$work/nvme" \
    --set zero_optimization.offload_param.device="$1" --set zero_optimization.offload_optimizer.device="$2" \
    2>"$work/err" | python3 -c 'import json,sys; print(json.load(sys.stdin)["weights_digest"])'
}
ref=$(digest none none)
if [ ${#ref} -ne 64 ]; then echo "FAIL: no digest from the reference run"; cat "$work/err"; exit 1; fi
fails=0
for p in none cpu nvme; do
  for o in none cpu nvme; do
    d=$(digest "$p" "$o")
    if [ "$d" = "$ref" ]; then echo "ok: param $p optim $o"; else echo "FAIL: param $p optim $o: $d != $ref"; cat "$work/err"; fails=$((fails + 1)); fi
  done
done
# The two-rank run differs from the one-rank run (twice the samples per step).
one=$("$strata" run builtin:seed --steps 3 --json --nvme-dir "$work/nvme1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["weights_digest"])')
[ "$one" != "$ref" ] && echo "ok: 1 rank differs from 2" || { echo "FAIL: 1 and 2 ranks agree"; fails=$((fails + 1)); }
rm -rf "$work"
[ "$fails" -eq 0 ]
