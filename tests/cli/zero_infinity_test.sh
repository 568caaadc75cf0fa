#!/usr/bin/env bash
# The ZeRO-Infinity reproduction (papers/zero-infinity/run.sh --quick) runs
# from the build and gives every Fig. 5c row a figure: five rows, each
# feasible (the paper-era gradient path keeps 0.5T and 1T in the DGX-2's
# CPU memory), each with a positive TFLOPS figure and a relative error.
# Usage: zero_infinity_test.sh STRATA SOURCE_DIR
set -euo pipefail
strata="$1"
src="$2"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
"$src/papers/zero-infinity/run.sh" --quick "$strata" >"$out"
cat "$out"
python3 - "$out" <<'PY'
import re, sys
rows = [l for l in open(sys.argv[1]) if re.match(r"\| (10B|50B|100B|0\.5T|1T) \|", l)]
assert len(rows) == 5, f"expected the five Fig. 5c rows, got {len(rows)}"
for r in rows:
    cells = [c.strip() for c in r.strip().strip("|").split("|")]
    assert cells[2] != "does not fit", r
    assert float(cells[2]) > 0, r
    assert re.fullmatch(r"[+-]\d+%", cells[3]), r
print("ok: five Fig. 5c rows with figures and errors")
PY
