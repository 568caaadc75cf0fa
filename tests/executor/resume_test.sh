#!/usr/bin/env bash
# Crash and resume, end to end: `strata run --save-every 2` is killed with
# SIGKILL at a random step, resumed with `--resume`, and must end with the
# weights digest of an uninterrupted run; with one rank and under
# `mpirun -np 2`, optimizer states and parameters on NVMe. A kill in the
# middle of a save (failpoint) leaves the previous checkpoint resumable.
# Usage: resume_test.sh STRATA_BINARY WORK_DIR [SECTION]
# Without SECTION every section runs; CTest runs each as its own test
# (resume_test.SECTION), in a work directory of its own.
set -u
strata=$1
only=${3:-}
sections="kill-1-rank kill-2-ranks torn-save"
[ -z "$only" ] || case " $sections " in *" $only "*) ;; *) echo "resume_test.sh: no section '$only' (one of: $sections)"; exit 2 ;; esac
section() { [ -z "$only" ] || [ "$only" = "$1" ]; }
work=$2/resume_test${only:+.$only}
rm -rf "$work"
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
steps=40
fails=0
digest() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["weights_digest"])' "$1" 2>/dev/null; }
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; sed 's/^/  | /' "$work/err" | tail -20; fails=$((fails + 1)); }

launches=()
section kill-1-rank && launches+=("")
section kill-2-ranks && launches+=("mpirun -np 2")
for launch in "${launches[@]}"; do
  what=${launch:-"1 rank"}
  ck="$work/ck-${launch:+mpi}"
  $launch "$strata" run builtin:seed --steps $steps --json --nvme-dir "$work/nvme" >"$work/whole.json" 2>"$work/err"
  ref=$(digest "$work/whole.json")
  [ ${#ref} -eq 64 ] || { bad "$what: uninterrupted run"; continue; }
  # Killed at a random step after the first checkpoint: the latest one is
  # at an even step somewhere before it.
  kill_at=$((3 + RANDOM % (steps - 6)))
  # The background job truncates its output itself, after this shell has
  # gone on: the previous launch's step lines must not be there to be found.
  rm -f "$work/out"
  $launch "$strata" run builtin:seed --steps $steps --nvme-dir "$work/nvme" --save-every 2 --checkpoint-dir "$ck" \
    >"$work/out" 2>"$work/err" &
  job=$!
  for _ in $(seq 1 600); do grep -q "^step $kill_at " "$work/out" 2>/dev/null && break; sleep 0.05; done
  # (this section's processes only: their command line names its work directory)
  if [ -n "$launch" ]; then pkill -9 -f "strata run builtin:seed --steps $steps --nvme-dir $work/nvme" ; fi
  kill -9 "$job" 2>/dev/null
  wait "$job" 2>/dev/null
  reached=$(grep -c "^step " "$work/out")
  latest=$(cat "$ck/latest" 2>/dev/null)
  if [ "$reached" -ge "$steps" ] || [ -z "$latest" ]; then bad "$what: the run was not killed mid-way (reached $reached, latest '$latest')"; continue; fi
  $launch "$strata" run builtin:seed --steps $steps --json --nvme-dir "$work/nvme" --resume "$ck" >"$work/rest.json" 2>"$work/err"
  got=$(digest "$work/rest.json")
  if [ "$got" = "$ref" ] && grep -q "^resumed from .*$latest" "$work/err"; then
    ok "$what: killed after step $reached, resumed from $latest: the uninterrupted digest"
  else
    bad "$what: killed after step $reached, resumed from $latest: digest $got, want $ref"
  fi
  rm -rf "$ck"
done

if section torn-save; then
# A kill in the middle of the second save (rank files written, not yet
# published): global_step2 stays the latest and resumes to the same end.
ck="$work/ck-save"
STRATA_FAILPOINT=kill-in-save:2 "$strata" run builtin:seed --steps 8 --nvme-dir "$work/nvme" --save-every 2 \
  --checkpoint-dir "$ck" >"$work/out" 2>"$work/err"
rc=$?
"$strata" run builtin:seed --steps 8 --json --nvme-dir "$work/nvme" >"$work/whole8.json" 2>/dev/null
if [ "$rc" -eq 137 ] && [ "$(cat "$ck/latest")" = "global_step2" ] && [ -d "$ck/global_step4.tmp" ]; then
  ok "killed during the second save: latest is still global_step2"
else
  bad "kill during a save: exit $rc, latest '$(cat "$ck/latest" 2>/dev/null)'"
fi
"$strata" run builtin:seed --steps 8 --json --nvme-dir "$work/nvme" --resume "$ck" --save-every 2 >"$work/rest.json" 2>"$work/err"
if [ "$(digest "$work/rest.json")" = "$(digest "$work/whole8.json")" ] && [ ! -e "$ck/global_step4.tmp" ] &&
   [ "$(cat "$ck/latest")" = "global_step8" ]; then
  ok "resumed from global_step2 after the crashed save, the same digest; the torn save cleared"
else
  bad "resume after a crashed save"
fi
# Bad resumes: no checkpoint (exit 2), a truncated rank file (named, exit 1).
"$strata" run builtin:seed --steps 8 --nvme-dir "$work/nvme" --resume "$work/none" >/dev/null 2>"$work/err"
rc=$?
[ "$rc" -eq 2 ] && grep -q "no checkpoint to resume in" "$work/err" && ok "no checkpoint: exit 2" || bad "no checkpoint: exit $rc"
truncate -s 100 "$ck/global_step8/zero_pp_rank_0_mp_rank_00_optim_states.bin"
"$strata" run builtin:seed --steps 10 --nvme-dir "$work/nvme" --resume "$ck" >/dev/null 2>"$work/err"
rc=$?
[ "$rc" -eq 1 ] && grep -q "zero_pp_rank_0_mp_rank_00_optim_states.bin' is damaged" "$work/err" && ok "a damaged file: exit 1, named" ||
  bad "damaged file: exit $rc"
fi
rm -rf "$work"
echo "$fails failure(s)"
[ "$fails" -eq 0 ]
