#!/usr/bin/env bash
# The sanitizer and fuzzing job (CI runs it after the normal suite; the
# README's test command stays the normal suite):
#  1. ASan + UBSan (clang): the whole test suite, build-asan/.
#  2. TSan (clang): the executor tests (stream workers, I/O threads, the
#     copy engine), build-tsan/, in two shards at once.
#  3. libFuzzer, built with ASan + UBSan in build-asan/: each target for a
#     fixed number of runs (at most STRATA_FUZZ_SECONDS, default 100),
#     two at a time, seeded with the shipped scenarios and
#     DeepSpeed configs, a plan and traces the CLI writes.
# Each phase prints its time and count (scripts/lib/phase.sh;
# docs/testing.md).
# Suppressions, each with its reason: scripts/sanitizers/. Any report fails
# the job (UBSan does not recover; ASan and TSan exit non-zero).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/phase.sh
phase_begin deps-sanitizers
scripts/install-deps.sh --sanitizers
phase_end - packages-checked
. scripts/lib/ccache-env.sh
jobs="${STRATA_JOBS:-2}"
fuzz_seconds="${STRATA_FUZZ_SECONDS:-100}"
supp="$(pwd)/scripts/sanitizers"
common="-fno-omit-frame-pointer"
# Line tables, not full debug information: the sanitizers' reports name
# file and line all the same, and the builds are a tenth faster.
config_flags="-O2 -gline-tables-only -DNDEBUG"

phase_begin asan-build
if [ ! -f build-asan/build.ninja ]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DSTRATA_BUILD_BENCH=OFF -DSTRATA_BUILD_FUZZ=ON -DSTRATA_JEMALLOC=OFF \
    -DCMAKE_CXX_FLAGS="$common -fsanitize=address,undefined -fno-sanitize-recover=all -fsanitize=fuzzer-no-link" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined"
fi
# (jemalloc stays out: the sanitizers bring their own allocator; a tree
# configured before the option existed gets it turned off here. The CUDA
# backend too: nvcc does not take these flags, and the CUDA runtime's
# allocations at initialization read as leaks; the normal build compiles it.)
cmake -S . -B build-asan -DSTRATA_JEMALLOC=OFF -DSTRATA_CUDA=OFF -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$config_flags" >/dev/null
cmake --build build-asan -j "$jobs" | tee build-asan/build.log
phase_end "$(ninja_steps build-asan/build.log)" build-steps
# Open MPI's leaks at exit are suppressed by library (lsan.supp). For the
# names to resolve, its components must stay mapped: a no-op dlclose is
# preloaded. (Unwinding without frame pointers, fast_unwind_on_malloc=0,
# would name more frames but made the suite 100x slower.)
clang -shared -fPIC -O2 "$supp/dlclose_noop.c" -o build-asan/libdlclose_noop.so
# (hard_rss_limit_mb, a bound on memory, is set only where cli_test checks
# one (its capmem): ASan's RSS watcher made Simulate.MonotoneInResources 8 s
# -> 30 s and a 512-GPU simulate 6.6 s -> 12-16 s.)
# intercept_tls_get_addr=0: LeakSanitizer's record of dynamic TLS (kept by
# intercepting __tls_get_addr; only dlopen'ed modules', Open MPI's
# components here) held a bogus block for the main thread ("DTLS 5 at
# 0x1684-0x400002786", LSAN_OPTIONS=verbosity=1:log_threads=1), and its
# tracer crashed at exit scanning it ("Tracer caught signal 11"): in 20 of
# 20 runs of Run.DirectGradientsGiveTheSameWeights once the Runner's stream
# workers outlived a step (another allocation pattern had met it too).
# Static TLS and every thread's stack are still roots; only a leak held
# through a dlopen'ed module's thread-local is missed.
export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:check_initialization_order=1:intercept_tls_get_addr=0"
export STRATA_SANITIZED=1
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
phase_begin asan-test
rc=0
(cd build-asan && LD_PRELOAD="$(pwd)/libdlclose_noop.so" ctest --output-on-failure -j "$jobs" --timeout 900) |
  tee build-asan/ctest.log || rc=$?
phase_end "$(ctest_count build-asan/ctest.log)" tests
[ "$rc" -eq 0 ] || exit "$rc"

phase_begin tsan-build
if [ ! -f build-tsan/build.ninja ]; then
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DSTRATA_BUILD_BENCH=OFF -DSTRATA_BUILD_GUI=OFF -DSTRATA_JEMALLOC=OFF \
    -DCMAKE_CXX_FLAGS="$common -fsanitize=thread" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread"
fi
cmake -S . -B build-tsan -DSTRATA_CUDA=OFF -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$config_flags" >/dev/null
cmake --build build-tsan -j "$jobs" --target executor_test | tee build-tsan/build.log
phase_end "$(ninja_steps build-tsan/build.log)" build-steps
# Death tests are left out: they fork the multi-threaded test process, which
# TSan does not support (gtest warns so too); the ASan run covers them.
# The no-op dlclose again: a called_from_lib library must stay loaded.
# Two shards of the tests (GoogleTest's sharding), one per core, each its
# own process; a failure prints that shard's log.
phase_begin tsan-test
tsan_shard() {  # tsan_shard INDEX: its log in build-tsan/test.INDEX.log, its status in test.INDEX.rc
  local rc=0
  LD_PRELOAD="$(pwd)/build-asan/libdlclose_noop.so" GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$1 \
    TSAN_OPTIONS="suppressions=$supp/tsan.supp:halt_on_error=1:second_deadlock_stack=1" \
    build-tsan/tests/executor_test --gtest_filter='-*DeathTest*' >"build-tsan/test.$1.log" 2>&1 || rc=$?
  echo "$rc" >"build-tsan/test.$1.rc"
}
tsan_shard 0 &
tsan_shard 1 &
wait
passed=0
for i in 0 1; do
  n=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\?\..*/\1/p' "build-tsan/test.$i.log" | tail -1)
  passed=$(( passed + ${n:-0} ))
  tail -3 "build-tsan/test.$i.log"
done
phase_end "$passed" tests
for i in 0 1; do
  rc=$(cat "build-tsan/test.$i.rc")
  [ "$rc" -eq 0 ] || { echo "sanitize: TSan shard $i failed (exit $rc):"; cat "build-tsan/test.$i.log"; exit 1; }
done

phase_begin fuzz
corpus=build-asan/fuzz-corpus
rm -rf "$corpus" build-asan/fuzz-found
mkdir -p "$corpus"/{scenario,deepspeed,plan,trace}
cp scenarios/*.yaml scenarios/studies/*.yaml "$corpus/scenario/"
cp scenarios/deepspeed/*.json "$corpus/deepspeed/"
# The hostile-input corpus (tests/hostile/: inputs each refused with its
# message) seeds every target with what an adversary already tried.
for t in scenario deepspeed plan trace; do cp tests/hostile/$t/* "$corpus/$t/"; done
# Seeds from the CLI (the suite above checked it; its MPI leaks at exit are
# not what this step is about).
seed_strata() { ASAN_OPTIONS=detect_leaks=0 build-asan/cli/strata "$@" >/dev/null; }
for s in seed gpt-tiny; do
  seed_strata plan "builtin:$s" -o "$corpus/plan/$s.json"
  seed_strata simulate "builtin:$s" --trace "$corpus/trace/$s.sim.json"
done
seed_strata run builtin:seed --steps 1 --nvme-dir build-asan/fuzz-nvme --trace "$corpus/trace/seed.run.json"
export ASAN_OPTIONS="detect_leaks=1"
# A fixed seed and a fixed number of runs per target, so CI fuzzes exactly
# the inputs fuzzed before a change lands; STRATA_FUZZ_SECONDS caps the time
# (a slower machine runs a prefix of the same inputs). Longer runs: raise
# STRATA_FUZZ_SCALE. Each target is one single-threaded process: two lanes
# run at once, one per core, each ending by the cap: the scenario target
# (about 40 inputs/s under ASan, so it stops at the cap) has a lane to
# itself, and the three others share the other lane and a third of the cap
# each (uncapped they took 44, 54 and 46 s here, and that lane set the
# phase's time).
scale="${STRATA_FUZZ_SCALE:-1}"
declare -A runs=([scenario]=20000 [deepspeed]=15000 [plan]=45000 [trace]=220000)
fuzz() {  # fuzz TARGET SECONDS: its log in build-asan/fuzz-found/TARGET.log, its status in TARGET.rc
  local t=$1 seconds=$2 rc=0
  mkdir -p "build-asan/fuzz-found/$t"
  "build-asan/tests/fuzz/${t}_fuzz" "$corpus/$t" -seed=1 -runs=$(( ${runs[$t]} * scale )) \
    -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="build-asan/fuzz-found/$t/" >"build-asan/fuzz-found/$t.log" 2>&1 || rc=$?
  echo "$rc" >"build-asan/fuzz-found/$t.rc"
}
fuzz scenario "$fuzz_seconds" &
third=$(( (fuzz_seconds + 2) / 3 ))
{ fuzz deepspeed "$third"; fuzz plan "$third"; fuzz trace "$third"; } &
wait
executed=0
for t in scenario deepspeed plan trace; do
  echo "-- ${t}_fuzz"
  tail -12 "build-asan/fuzz-found/$t.log"
  n=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "build-asan/fuzz-found/$t.log" | tail -1)
  executed=$(( executed + ${n:-0} ))
  [ "$(cat "build-asan/fuzz-found/$t.rc")" -eq 0 ] || { echo "sanitize: ${t}_fuzz found a failure (build-asan/fuzz-found/$t/)"; exit 1; }
done
phase_end "$executed" fuzz-inputs
echo "sanitize: ASan/UBSan suite, TSan executor tests and the fuzzers: clean"
