#!/bin/bash
# DP attention on several GPUs of one host (issue 43): sglang 0.5.12, a tiny random-weight dense Qwen3
# target + EAGLE-3 draft, --tp N --dp N --enable-dp-attention, the threshold patch three ways.
#
#   bash specstate/integration/gpu_run_dp.sh OUT_DIR BUDGET_S [PHASE ...]
#
# PHASE: dp<N>-<seed|topk1>-<naive|fixed|agreed> (python -m specstate.integration.dp_plan phases --gpus N);
# none given: every phase the visible GPUs allow. Before any engine starts the multi-rank model's
# prediction for every phase to run is written (OUT_DIR/prediction.json, printed as '[dp] predicted ...');
# DP_PREDICT_ONLY=1 stops there (the CPU rehearsal, tests/test_gpu_dp_plan.py). Then each phase is one
# engine under a limit that keeps the script within BUDGET_S; a hang ends in sglang's watchdog
# (--watchdog-timeout) or the driver's --timeout and is reported with its phase and each rank's last
# breadcrumb (the forward it entered and never left). Every rank records (rec/<workload>.rank<R>.jsonl),
# then dp_plan judges real against predicted (OUT_DIR/dp-verdict.json, '[dp] VERDICT: ...').
# Results: OUT_DIR/{log is yours to tee, gpu.txt, prediction.json, dp-verdict.json, results.tar.gz}.
#
# Site: .gpu-v1/site-v1.tar.xz (docs/gpu.md, "Set-up that fits") unpacked into /tmp/site, else the
# wheelhouse .whl/ installed there, unless /tmp/site/.specstate-installed exists.
set -uo pipefail
OUT=${1:?usage: gpu_run_dp.sh OUT_DIR BUDGET_S [PHASE ...]}
BUDGET=${2:?budget seconds}
shift 2
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=${DP_WORK:-/tmp/specstate-dp}
mkdir -p "$WORK/run"
T0=$SECONDS
PY=${DP_PYTHON:-python3}
SITE=${DP_SITE:-/tmp/site}   # where the site is unpacked (a rehearsal points it at a fake sglang)
# per-phase ceiling (seconds): cold engine start (~90 s, more with N ranks) + workloads + a hang's watchdog
PHASE_MAX=${DP_PHASE_MAX:-200}

# NVLink multicast stays off (../.library device notes: it can take the host's GPUs out of service)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# a collective that never completes ends instead of hanging: torch's NCCL watchdog aborts and dumps
# its flight recorder (the last collectives, per rank) besides sglang's own scheduler watchdog
export TORCH_NCCL_ASYNC_ERROR_HANDLING=1 TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_NCCL_TRACE_BUFFER_SIZE=2000 \
  NCCL_DEBUG=${NCCL_DEBUG:-WARN} HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
export SPECSTATE_REC_PER_RANK=1

if [ -z "${DP_PREDICT_ONLY:-}" ] && [ ! -f "$SITE/.specstate-installed" ]; then
  mkdir -p "$SITE"
  if [ -f .gpu-v1/site-v1.tar.xz ]; then
    tar -xJf .gpu-v1/site-v1.tar.xz -C "$SITE" || exit 3
  elif ls .whl/*.whl >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" .whl/*.whl .whl/opt/*.whl || exit 3
  else
    echo "[gpu_run_dp] no site: carry .gpu-v1 (site-v1.tar.xz) or .whl"; exit 3
  fi
  touch "$SITE/.specstate-installed"
fi
[ -z "${DP_PREDICT_ONLY:-}" ] && export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
echo "[gpu_run_dp] site ready after $((SECONDS - T0)) s"

GPUS=${DP_GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null; echo "gpus $GPUS"; } | tee "$OUT/gpu.txt"
if [ "$GPUS" -lt 2 ]; then echo "[gpu_run_dp] needs 2 or more GPUs, saw $GPUS"; exit 3; fi
if [ $# -eq 0 ]; then set -- $($PY -m specstate.integration.dp_plan phases --gpus "$GPUS"); fi

# 1. the model's prediction for every phase to run, before any engine starts
$PY -m specstate.integration.dp_plan predict "$WORK" "$@" --gpus "$GPUS" || exit 3
cp "$WORK/prediction.json" "$OUT/"
echo "[gpu_run_dp] prediction written after $((SECONDS - T0)) s"
[ -n "${DP_PREDICT_ONLY:-}" ] && exit 0

# 2. the phases, one engine each
rc_all=0
for PH in "$@"; do
  ARGS=$($PY -m specstate.integration.dp_plan args "$WORK" "$PH") || { echo "[gpu_run_dp] unknown phase $PH"; rc_all=1; continue; }
  N=${PH#dp}; N=${N%%-*}
  if [ "$N" -gt "$GPUS" ]; then echo "[gpu_run_dp] skip $PH: needs $N GPUs, saw $GPUS"; continue; fi
  LEFT=$((BUDGET - (SECONDS - T0) - 30))
  LIM=$PHASE_MAX
  [ "$LEFT" -lt "$LIM" ] && LIM=$LEFT
  if [ "$LIM" -lt 100 ]; then echo "[gpu_run_dp] skip $PH: only $LEFT s left"; continue; fi
  D="$WORK/run/$PH"
  echo "[gpu_run_dp] ===== phase $PH (limit $LIM s, $((SECONDS - T0)) s elapsed) ====="
  case $PH in *-agreed) ALLOW=0 ;; *) ALLOW=1 ;; esac
  mkdir -p "$D"
  SPECSTATE_DP_ALLOW=$ALLOW SPECSTATE_DP_TRACE="$D/trace" TORCH_NCCL_DEBUG_INFO_TEMP_FILE="$D/nccl_trace_rank_" \
    timeout -s KILL $((LIM + 20)) $PY -m specstate.integration.sglang_driver run --out "$D" --timeout "$LIM" \
    --start-timeout $((LIM - 20)) $ARGS
  rc=$?
  echo "[gpu_run_dp] phase $PH exit $rc after $((SECONDS - T0)) s"
done

# 3. real against predicted (exit 0 only if every phase that ran came out as predicted)
$PY -m specstate.integration.dp_plan judge "$WORK"
jrc=$?
[ $jrc -ne 0 ] && rc_all=$jrc
cp "$WORK/dp-verdict.json" "$OUT/" 2>/dev/null
tar czf "$WORK.tar.gz" -C "$WORK" .
if [ "$(stat -c %s "$WORK.tar.gz")" -gt 15000000 ]; then
  split -b 15000000 -d -a 1 "$WORK.tar.gz" "$OUT/results.tar.gz.part"   # cat results.tar.gz.part* | tar xz
else
  cp "$WORK.tar.gz" "$OUT/results.tar.gz"
fi
ls -la "$OUT"
echo "[gpu_run_dp] done after $((SECONDS - T0)) s"
exit $rc_all
