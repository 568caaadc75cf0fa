#!/usr/bin/env bash
# Soak: `strata run` of the seed scenario for STEPS steps (default 2000)
# with NVMe offload, its resident set sampled every 0.2 s from
# /proc/PID/status. After the warm-up (the first 10% of the steps), the RSS
# must stay within 5% of its post-warm-up minimum: a leak per step shows as
# a climb. The samples after the last step (the final gather and
# teardown) are left out. Prints min/median/max and the samples' trend; exit 1 if not flat.
# Usage: scripts/soak.sh [STEPS] [STRATA_BINARY]   (not part of the tests: ~2 minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-2000}
strata=${2:-build/cli/strata}
work=$(mktemp -d)
trap '[ -n "${SOAK_KEEP:-}" ] && cp "$work/rss" "$SOAK_KEEP"; rm -rf "$work"' EXIT
"$strata" run builtin:seed --steps "$steps" --nvme-dir "$work/nvme" >"$work/out" 2>"$work/err" &
pid=$!
: >"$work/rss"
while kill -0 "$pid" 2>/dev/null; do
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
  step=$(grep -c '^step ' "$work/out" 2>/dev/null || true)
  [ -n "$rss" ] && echo "$step $rss" >>"$work/rss"
  sleep 0.2
done
wait "$pid" || { echo "soak: the run failed"; cat "$work/err"; exit 1; }
python3 - "$work/rss" "$steps" <<'PY'
import statistics, sys
rows = [tuple(map(int, l.split())) for l in open(sys.argv[1]) if l.strip()]
steps = int(sys.argv[2])
# After the last step the run gathers the weights and tears down: not the
# steady state.
after = [kb for step, kb in rows if steps // 10 <= step < steps]
if len(after) < 10:
    sys.exit("soak: too few samples after the warm-up")
lo, hi, med = min(after), max(after), statistics.median(after)
half = len(after) // 2
first, last = statistics.median(after[:half]), statistics.median(after[half:])
print(f"soak: {steps} steps, {len(after)} RSS samples after step {steps // 10}: "
      f"min {lo / 1024:.1f} MiB, median {med / 1024:.1f} MiB, max {hi / 1024:.1f} MiB "
      f"(max/min {hi / lo:.3f}); median of the first half {first / 1024:.1f} MiB, second half {last / 1024:.1f} MiB")
sys.exit(0 if hi <= lo * 1.05 else "soak: RSS grew more than 5% after the warm-up")
PY
