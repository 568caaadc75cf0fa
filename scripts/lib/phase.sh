# Phase timing for the CI scripts (sourced by run-tests.sh, sanitize.sh and
# .ci/run). A phase prints one line when it ends,
#   == phase NAME: 123 s, 388 tests
# and, when STRATA_CI_TIMES names a file, appends "NAME<TAB>SECONDS<TAB>COUNT"
# to it, so .ci/run can print the whole run's table at the end
# (docs/testing.md, "Budget").

# phase_begin NAME: starts the clock of phase NAME.
phase_begin() {
  _phase_name=$1
  _phase_t0=$(date +%s)
  echo "== phase $1: started $(date -u +%H:%M:%S)"
}

# phase_end COUNT UNIT: ends the current phase; COUNT of UNIT ran in it
# ("tests", "fuzz runs", "packages"; COUNT "-" when nothing is counted).
phase_end() {
  local s=$(( $(date +%s) - _phase_t0 ))
  echo "== phase $_phase_name: $s s, $1 $2"
  if [ -n "${STRATA_CI_TIMES:-}" ]; then printf '%s\t%s\t%s %s\n' "$_phase_name" "$s" "$1" "$2" >>"$STRATA_CI_TIMES"; fi
}

# ctest_count LOG: how many tests ctest ran, from its summary line
# ("100% tests passed, 0 tests failed out of 388").
ctest_count() {
  sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$1" | tail -1
}

# ninja_steps LOG: how many build steps ninja ran ("[57/178] ..." lines; 0
# when it had nothing to do).
ninja_steps() {
  local n
  n=$(sed -n 's/^\[\([0-9]*\)\/[0-9]*\].*/\1/p' "$1" | tail -1)
  echo "${n:-0}"
}
