#!/usr/bin/env bash
# Install dependencies, build everything (tests and benchmarks) and run the
# test suite. Exit status is the suite's. Each phase prints one timing line
# (scripts/lib/phase.sh; docs/testing.md, "Budget").
#   --quick   the developer's inner loop: the tests not labelled `slow`
#             (docs/testing.md, "Labels")
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/phase.sh
ctest_args=()
case "${1:-}" in
  "") ;;
  --quick) ctest_args=(-LE slow) ;;
  *) echo "usage: scripts/run-tests.sh [--quick]" >&2; exit 2 ;;
esac

phase_begin deps
scripts/install-deps.sh
phase_end - packages-checked

phase_begin build
mkdir -p build
scripts/build.sh | tee build/build.log
phase_end "$(ninja_steps build/build.log)" build-steps

phase_begin test
rc=0
(cd build && ctest --output-on-failure -j 2 "${ctest_args[@]}") | tee build/ctest.log || rc=$?
phase_end "$(ctest_count build/ctest.log)" tests
exit "$rc"
