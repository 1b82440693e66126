#!/bin/bash
# Run specstate workloads through the real sglang 0.5.12 EAGLEWorker on the GPU host.
#
#   bash specstate/integration/gpu_run.sh OUT_DIR BUDGET_S PHASE [PHASE ...]
#   bash specstate/integration/gpu_run.sh PLAN.json OUT_DIR        (several engines, one call)
#
# A plan (specstate/integration/plan.py, docs/gpu.md "A plan"): engines in order, each with its
# family, patch or plugin, engine arguments, adaptive config and workloads in order, within the
# plan's budget_s (checked before each engine starts), then every recording against the model
# (PLAN_CONFORM_S, default 90 s). Results: OUT_DIR/plan-summary.json, OUT_DIR/conform.json,
# OUT_DIR/results.tar.gz (one folder per engine).
#
# PHASE: fixed | agree | naive-graph | naive-eager | seed-carried | seed-alloc | fixed-repeated | none | pressure-a | pressure-b | overhead
#        (each one engine start)
# Installs the wheelhouse .whl/ (bash ../shared/gpu/build-wheelhouse.sh .whl, carried to the
# host) into /tmp/site once, then runs the phases in order, each under a time limit that keeps
# the whole script within BUDGET_S seconds. Results: OUT_DIR/<phase>/ (recordings, summary.json),
# OUT_DIR/summary-<phase>.json, OUT_DIR/results.tar.gz (every phase folder).
set -uo pipefail
PLAN=
if [[ "${1:-}" == *.json ]] && [ -f "$1" ]; then
  PLAN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
  OUT=${2:?usage: gpu_run.sh PLAN.json OUT_DIR}
  BUDGET=0
  shift 2
else
  OUT=${1:?usage: gpu_run.sh OUT_DIR BUDGET_S PHASE... | gpu_run.sh PLAN.json OUT_DIR}
  BUDGET=${2:?budget seconds}
  shift 2
fi
SITE=${SPECSTATE_SITE:-/tmp/site}  # the unpacked site (a CPU rehearsal points it elsewhere)
mkdir -p "$OUT"
WORK=${SPECSTATE_WORK:-/tmp/specstate-work}
mkdir -p "$WORK"
T0=$SECONDS

if [ ! -f "$SITE/.specstate-installed" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" .whl/*.whl || exit 3
  PYTHONPATH="$SITE" python3 -c "import pydantic" 2>/dev/null || \
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" .whl/opt/*.whl || exit 3
  touch "$SITE/.specstate-installed"
fi
export PYTHONPATH="$SITE" HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
echo "[gpu_run] install done after $((SECONDS - T0)) s"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$OUT/gpu.txt"

if [ -n "$PLAN" ]; then
  python3 -m specstate.integration.plan "$PLAN" "$WORK/plan"
  rc=$?
  cp "$WORK/plan/plan-summary.json" "$OUT/" 2>/dev/null
  tar czf "$OUT/results.tar.gz" -C "$WORK/plan" .
  if [ "$(stat -c %s "$OUT/results.tar.gz")" -gt 15000000 ]; then  # 16 MiB a file comes back
    split -b 15000000 -d "$OUT/results.tar.gz" "$OUT/results.tar.gz." && rm "$OUT/results.tar.gz"
  fi
  ls -la "$OUT"
  echo "[gpu_run] plan exit $rc after $((SECONDS - T0)) s"
  # conformance of every recording with the model (fixed patch: fixed-threshold at the engine's
  # threshold), one process per CPU, within PLAN_CONFORM_S seconds: OUT/conform.json
  timeout -k 5 "${PLAN_CONFORM_S:-90}" python3 -m specstate.integration.plan conform "$PLAN" "$WORK/plan" "$OUT/conform.json"
  crc=$?
  echo "[gpu_run] conformance exit $crc after $((SECONDS - T0)) s"
  [ $rc -eq 0 ] && [ $crc -eq 0 ]
  exit $?
fi

# per-phase ceilings (seconds); each is also cut to what is left of BUDGET
declare -A MAXT=([fixed]=330 [agree]=200 [naive-graph]=150 [naive-eager]=150 [seed-carried]=200 [seed-alloc]=150 [fixed-repeated]=200 [none]=200 [pressure-a]=280 [pressure-b]=280 [overhead]=360)
rc_all=0
for PH in "$@"; do
  LEFT=$((BUDGET - (SECONDS - T0) - 25))
  LIM=${MAXT[$PH]:-200}
  [ "$LEFT" -lt "$LIM" ] && LIM=$LEFT
  if [ "$LIM" -lt 60 ]; then echo "[gpu_run] skip $PH: only $LEFT s left"; continue; fi
  echo "[gpu_run] ===== phase $PH (limit $LIM s, $((SECONDS - T0)) s elapsed) ====="
  D="$WORK/$PH"
  case $PH in
    fixed) ARGS="--patch fixed --scenario seed-sweep --random 20 --timing" ;;
    agree) ARGS="--patch fixed --agree --scenario seed-sweep --random 5" ;;
    naive-graph) ARGS="--patch naive --naive-path graph --scenario seed-sweep" ;;
    naive-eager) ARGS="--patch naive --naive-path eager --scenario seed-sweep" ;;
    # the seed's patch as the seed describes it (issue 35): the target forward on the batch as the
    # scheduler handed it, on the seed's benchmark (one repeated prompt, waves above 5 split 2 + rest)
    seed-carried) ARGS="--patch naive --naive-path carried --scenario seed-repeated" ;;
    seed-alloc) ARGS="--patch naive --naive-path carried-alloc --scenario seed-repeated" ;;
    fixed-repeated) ARGS="--patch fixed --scenario seed-repeated --random 3" ;;
    none) ARGS="--patch none --scenario seed-sweep --random 5 --timing" ;;
    # memory pressure (issue 13): small pools, small chunks, radix cache on (sglang's default)
    pressure-a) ARGS="--patch fixed --scenario seed-sweep --pressure 3 --pressure-seed 20 --fuzz-derived 2 --engine-arg max_total_tokens=2048 --engine-arg chunked_prefill_size=64" ;;
    # the same through a user-style plugin (tests/user_plugins/my_switch.py), a larger pool
    # recorder overhead (issue 11): off / deferred / lean / full blocks alternating in one engine,
    # after the seed sweep and 5 random workloads recorded in deferred mode (checked by conformance);
    # SPECSTATE_OVERHEAD_MODES / _REPS change the timing rotation (e.g. off,deferred and 16)
    overhead) ARGS="--patch fixed --rec-mode deferred --scenario seed-sweep --random 5 --timing --timing-reps ${SPECSTATE_OVERHEAD_REPS:-8} --timing-modes ${SPECSTATE_OVERHEAD_MODES:-off,deferred,lean,full}" ;;
    pressure-b) ARGS="--plugin tests.user_plugins.my_switch:register --pressure 3 --pressure-seed 30 --fuzz-derived 2 --engine-arg max_total_tokens=6144 --engine-arg chunked_prefill_size=256" ;;
    *) echo "unknown phase $PH"; continue ;;
  esac
  timeout -s KILL $((LIM + 20)) python3 -m specstate.integration.sglang_driver run --out "$D" --timeout "$LIM" $ARGS
  rc=$?
  echo "[gpu_run] phase $PH exit $rc after $((SECONDS - T0)) s"
  [ -f "$D/summary.json" ] && cp "$D/summary.json" "$OUT/summary-$PH.json"
  [ $rc -ne 0 ] && rc_all=1
done
tar czf "$OUT/results.tar.gz" -C "$WORK" . && ls -la "$OUT"
echo "[gpu_run] done after $((SECONDS - T0)) s"
exit $rc_all
