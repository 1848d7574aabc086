#!/usr/bin/env bash
# The checks a machine with a GPU can run, prepared so whoever gets one runs them in one go
# (docs/nightly.md, "The accelerator script"):
#
#   scripts/accelerator-check.sh OUT_DIR
#
# 1. installs this checkout, without network, into a python that already has jax with CUDA
#    ($PYTHON -m pip install --no-deps --no-build-isolation --no-index -e .);
# 2. prints what that python sees (jax, jaxlib, hypothesis, the devices);
# 3. checks the goldens (recorded on interpret) on the GPU: kernel against the reference
#    recomputed there, drift beside it;
# 4. runs `check --backend gpu --profile ci` for gpu-mha gpu-decode gpu-paged gpu-norm
#    gpu-softmax and sdpa, one family per step (a step that runs out of time loses one
#    family's results, not all), each with --json and --junit;
# 5. `kernel-harness bench --backend gpu --json` on the same families, one step each (their
#    JSON in parts.tar.gz);
# 6. merges the check results into OUT_DIR/check.json and check.xml (`kernel-harness merge`).
#
# Each step is time-limited (`timeout`), and all of them together stay inside
# KH_TOTAL_SECONDS (default 450: under 8 minutes); a failing or timed-out step never stops
# the next. Output: OUT_DIR/accelerator-check.log (every step's output), summary.txt,
# check.json, check.xml, parts.tar.gz (the per-family check and bench results). Exit 0 only if
# every step exited 0.
#
# Environment: PYTHON (default python3); KH_ACCEL_BACKEND (default gpu; `interpret` is a dry
# run of the plumbing on a machine without a GPU, e.g. in CI); KH_MAX_EXAMPLES (default 4:
# examples per property, bounding the ci profile's 30 to fit the time); KH_TOTAL_SECONDS.
set -u
cd "$(dirname "$0")/.."

if [ $# -ne 1 ]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
OUT=$1
PYTHON=${PYTHON:-python3}
BACKEND=${KH_ACCEL_BACKEND:-gpu}
EXAMPLES=${KH_MAX_EXAMPLES:-4}
TOTAL=${KH_TOTAL_SECONDS:-450}
RESERVE=20  # kept for the merge and the summary
FAMILIES="gpu-mha gpu-decode gpu-paged gpu-norm gpu-softmax sdpa"
mkdir -p "$OUT/parts" || { echo "$0: cannot create $OUT" >&2; exit 2; }
OUT=$(cd "$OUT" && pwd)
LOG=$OUT/accelerator-check.log
SUMMARY=$OUT/summary.txt
: > "$LOG"
: > "$SUMMARY"
START=$(date +%s)
DEADLINE=$((START + TOTAL))
FAILED=0
KH=("$PYTHON" -m kernel_harness.cli)  # works from the checkout even if step 1 failed

# step NAME LIMIT_SECONDS COMMAND...: runs COMMAND under `timeout`, never past the deadline.
step() {
  local name=$1 limit=$2 now left rc status t0 t1
  shift 2
  now=$(date +%s)
  left=$((DEADLINE - RESERVE - now))
  if [ "$name" = merge ]; then left=$((DEADLINE - now)); fi
  if [ "$left" -lt 5 ]; then
    printf '%-22s %-22s %5s s\n' "$name" "NOT RUN (out of time)" 0 | tee -a "$SUMMARY"
    FAILED=1
    return
  fi
  if [ "$limit" -gt "$left" ]; then limit=$left; fi
  printf '\n===== %s (limit %s s): %s\n' "$name" "$limit" "$*" >> "$LOG"
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >> "$LOG" 2>&1
  rc=$?
  t1=$(date +%s)
  case $rc in
    0) status=ok ;;
    124|137) status="TIMEOUT (${limit} s)" ;;
    *) status="FAIL (exit $rc)" ;;
  esac
  [ "$rc" -eq 0 ] || FAILED=1
  printf '%-22s %-22s %5s s\n' "$name" "$status" $((t1 - t0)) | tee -a "$SUMMARY"
}

echo "accelerator check: backend $BACKEND, $EXAMPLES examples per property, at most $TOTAL s," \
  "python $PYTHON, results in $OUT" | tee -a "$SUMMARY"
[ "$BACKEND" = gpu ] || echo "DRY RUN on $BACKEND: the plumbing, not the GPU" | tee -a "$SUMMARY"

# Builds with that python's own setuptools (pyproject: setuptools>=68); the later steps run
# from the checkout (python -m kernel_harness.cli) even if this one fails.
step install 90 "$PYTHON" -m pip install --no-deps --no-build-isolation --no-index -q -e .
step environment 60 "$PYTHON" -c "
import sys, jax, jaxlib, hypothesis, numpy
print('python', sys.version.split()[0], 'jax', jax.__version__, 'jaxlib', jaxlib.__version__,
      'hypothesis', hypothesis.__version__, 'numpy', numpy.__version__)
print('devices', jax.devices())
if '$BACKEND' == 'gpu':
    print('gpu', jax.devices('gpu'))  # raises (step FAIL) where jax has no CUDA backend
"
# shellcheck disable=SC2086  # FAMILIES is a list of words
step golden 90 "${KH[@]}" golden check $FAMILIES --backend "$BACKEND"
# gpu-mha compiles a Triton forward and backward per example: 75 s was too little for its
# 6 properties on an H100 (2026-12-05: 5 done in 30 s, finite-out still compiling at 75 s).
for family in $FAMILIES; do
  limit=75
  [ "$family" = gpu-mha ] && limit=150
  step "check $family" "$limit" "${KH[@]}" check "$family" --backend "$BACKEND" --profile ci \
    --max-examples "$EXAMPLES" --timeout 120 --progress-every 30 \
    --json "$OUT/parts/check-$family.json" --junit "$OUT/parts/check-$family.xml"
done
# One bench step per family (a timeout loses one family's times), three lengths: all six
# families over bench's default six lengths did not fit 90 s on an H100 (gpu-mha reached
# 4096). The dry run times one short length: the interpreter's times mean nothing.
lengths=(--seq-lens 1024,4096,16384)
[ "$BACKEND" = gpu ] || lengths=(--seq-lens 256)
for family in $FAMILIES; do
  step "bench $family" 45 "${KH[@]}" bench "$family" --backend "$BACKEND" "${lengths[@]}" \
    --max-seconds 1 --json "$OUT/parts/bench-$family.json"
done
parts=("$OUT"/parts/check-*.json)
if [ -e "${parts[0]}" ]; then
  step merge 20 "${KH[@]}" merge "${parts[@]}" --json "$OUT/check.json" --junit "$OUT/check.xml"
else
  printf '%-22s %-22s %5s s\n' merge "NOT RUN (no results)" 0 | tee -a "$SUMMARY"
  FAILED=1
fi
tar czf "$OUT/parts.tar.gz" -C "$OUT" parts && rm -r "$OUT/parts"

echo "----- merged check results (tail of the merge step)"
sed -n '/===== merge/,$p' "$LOG" | tail -n 25
echo "-----"
cat "$SUMMARY"
echo "$( [ $FAILED = 0 ] && echo PASS || echo FAIL ): accelerator check in $(( $(date +%s) - START )) s" \
  "(log: $LOG)" | tee -a "$SUMMARY"
exit $FAILED
