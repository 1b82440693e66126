#!/bin/bash
# One command on a fresh GPU host: sglang 0.5.17 (EAGLEWorkerV2, overlap scheduler, upstream's
# adaptive speculation: 3 steps up to batch size 5, drafting off from 6) with the recorder on,
# the seed's sweep plus random and fuzzer-generated workloads in ONE engine, then conformance of
# every recording with the v2 model (upstream-adaptive), all within a hard wall-clock limit.
#
#   bash specstate/integration/gpu_run_v17.sh OUT_DIR [LIMIT_S]      (repo root; LIMIT_S default 410)
#
# Needs the site tarball .whl17/site17.tar.xz (bash specstate/integration/build_site17.sh .whl17,
# carried to the host). Environment knobs (defaults): WHL17=.whl17, SITE17=/tmp/site17,
# PYTHON=python3, V17_ARGS (the driver's workload arguments), V17_WORK=/tmp/specstate-v17,
# V17_CONFORM_S=60 (the conformance's share of LIMIT_S), V17_PLAN (several engines: a plan file of
# NAME|driver-arguments[|VAR=VALUE ...] lines, or ``pressure17`` for sglang_0_5_17/pressure17.py's,
# ``reverts17`` for sglang_0_5_17/reverts17.py's: upstream's reverted fixes, ``static17`` for
# sglang_0_5_17/static17.py's: static launches and the seed's switch on EAGLEWorkerV2
# (V17_STATIC17_SHORT=1: its short workloads); PROBE_S=75 caps each ``start-*`` engine; a
# ``probe-*`` engine runs only with PROBE_MIN_S=45 s left; an engine whose plan line sets
# V17_EXPECT=crash does not fail the run by crashing: the conformance judges its crash).
# The site is unpacked once into SITE17, marked by SITE17/.specstate-unpacked: a later call on
# the same machine reuses it, .whl17 carried or not.
# Writes under OUT_DIR, whatever fails on the way:
#   log               everything printed (this script, the driver, the engine, conformance)
#   gpu.txt           GPU, driver, Python, torch
#   summary.json      the driver's summary (per workload: waves, outputs, recording counts)
#   recordings.tar.gz run/ = the driver's folder: rec/<workload>.jsonl, host_result.json,
#                     host_config.json, stats.jsonl, crash.jsonl (if any), summary.json
#   conform.json      every recording against upstream-adaptive, step by step, one process per
#                     CPU (python -m specstate.integration.conform_folder; rewritten
#                     after each recording, so a cut-short check leaves what it checked)
# Exit status: 0 when the engine ran every workload and every recording conforms.
set -uo pipefail
OUT=${1:?usage: gpu_run_v17.sh OUT_DIR [LIMIT_S]}
LIMIT=${2:-410}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-python3}
WORK=${V17_WORK:-/tmp/specstate-v17}
CONFORM_S=${V17_CONFORM_S:-60}  # the CPU conformance after the run (one process per CPU)
SITE=${SITE17:-/tmp/site17}  # the unpacked site: sglang and what it needs, pydantic too (specstate's schemas)
PACK_S=15     # packing, and the inner part's grace

if [ -z "${_V17_INNER:-}" ]; then
  # outer part: the run under a hard limit, then (always) pack, conform and report
  T0=$SECONDS
  rm -rf "$WORK" && mkdir -p "$WORK"
  _V17_INNER=1 timeout -k 5 $((LIMIT - CONFORM_S - PACK_S)) bash "$0" "$OUT" "$LIMIT" 2>&1 | tee "$OUT/log"
  rc=${PIPESTATUS[0]}
  say() { echo "[gpu_run_v17] $*" | tee -a "$OUT/log"; }
  say "run part exit $rc after $((SECONDS - T0)) s"
  [ -f "$WORK/run/summary.json" ] && cp "$WORK/run/summary.json" "$OUT/summary.json"
  tar czf "$OUT/recordings.tar.gz" -C "$WORK" run 2>&1 | tee -a "$OUT/log"
  if [ "$(stat -c %s "$OUT/recordings.tar.gz" 2>/dev/null || echo 0)" -gt 15000000 ]; then  # 16 MiB a file
    split -b 15000000 -d "$OUT/recordings.tar.gz" "$OUT/recordings.tar.gz." && rm "$OUT/recordings.tar.gz"
    say "recordings split into $(ls "$OUT" | grep -c 'recordings.tar.gz.') parts: cat recordings.tar.gz.* > recordings.tar.gz"
  fi
  RECS="$WORK/run/rec"
  if [ -n "${V17_PLAN:-}" ]; then  # every engine's recordings, named ENGINE__WORKLOAD.jsonl
    RECS="$WORK/allrec" && mkdir -p "$RECS"
    for f in "$WORK"/run/*/rec/*.jsonl; do [ -f "$f" ] && cp "$f" "$RECS/$(basename "$(dirname "$(dirname "$f")")")__$(basename "$f")"; done
  fi
  (cd "$REPO" && PYTHONPATH="$REPO:$SITE${PYTHONPATH:+:$PYTHONPATH}" timeout -k 5 "$CONFORM_S" \
    "$PY" -m specstate.integration.conform_folder --jobs 0 "$RECS" "$OUT/conform.json") 2>&1 | tee -a "$OUT/log"
  crc=${PIPESTATUS[0]}
  say "conformance exit $crc; done after $((SECONDS - T0)) s"
  ls -la "$OUT" | tee -a "$OUT/log"
  if [ "$(stat -c %s "$OUT/log")" -gt 15000000 ]; then
    { head -c 5000000 "$OUT/log"; echo; echo "[gpu_run_v17] (log cut in the middle)"; tail -c 9000000 "$OUT/log"; } > "$OUT/log.cut"
    mv "$OUT/log.cut" "$OUT/log"
  fi
  [ "$rc" -eq 0 ] && [ "$crc" -eq 0 ]
  exit $?
fi

# inner part: unpack the site, start one engine, run every workload
T0=$SECONDS
WHL=${WHL17:-$REPO/.whl17}
if [ -f "$SITE/.specstate-unpacked" ]; then
  echo "[gpu_run_v17] reusing the site unpacked in $SITE (marker .specstate-unpacked)"
elif [ -f "$WHL/site17.tar.xz" ]; then  # a folder without the marker is a cut-short unpack: start again
  rm -rf "$SITE" && mkdir -p "$SITE" && tar -C "$SITE" -xJf "$WHL/site17.tar.xz" \
    || { echo "[gpu_run_v17] cannot unpack $WHL/site17.tar.xz into $SITE"; exit 3; }
  touch "$SITE/.specstate-unpacked"
else
  echo "[gpu_run_v17] no site: $SITE has no marker .specstate-unpacked (no earlier unpack on this machine) and" \
       "$WHL/site17.tar.xz is missing: carry .whl17 (bash specstate/integration/build_site17.sh .whl17)"
  exit 3
fi
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 SGLANG_ENABLE_JIT_DEEPGEMM=0 PYTHONUNBUFFERED=1
if ! ldconfig -p 2>/dev/null | grep -q libnuma.so.1 && [ -d "$WHL/lib" ]; then
  export LD_LIBRARY_PATH="$WHL/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
echo "[gpu_run_v17] site unpacked after $((SECONDS - T0)) s"
{ command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  "$PY" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)"
} 2>&1 | tee "$OUT/gpu.txt"
# seed sweep, 16 random workloads crossing batch size 5 both ways, 10 from the v2 fuzzer's generator
# (the same as sglang_assets/fuzz-workloads-v2/); agreeing weights so drafts get accepted
if [ -n "${V17_PLAN:-}" ]; then
  # several engines in a row, one per line of the plan (NAME|driver arguments; ``pressure17.py``:
  # V17_PLAN=pressure17 writes its workloads, configs and plan first); each into run/NAME; a
  # start probe's engine may be refused at start (its log says why); PROBE_S caps each probe
  cd "$REPO" || exit 3
  case "$V17_PLAN" in pressure17|pressure17-*)
    PYTHONPATH="$REPO:$PYTHONPATH" "$PY" -m specstate.integration.sglang_0_5_17.pressure17 "$WORK/w" >/dev/null || exit 3
    V17_PLAN=$WORK/w/plan${V17_PLAN#pressure17}.txt;;
  reverts17)  # upstream's reverted fixes (SGLANG_DEBUG_REVERT_PR), one engine each: sglang_0_5_17/reverts17.py
    PYTHONPATH="$REPO:$PYTHONPATH" "$PY" -m specstate.integration.sglang_0_5_17.reverts17 "$WORK/w" >/dev/null || exit 3
    V17_PLAN=$WORK/w/plan-reverts.txt;;
  static17)  # static launches, the seed's switch on EAGLEWorkerV2 naive and corrected: sglang_0_5_17/static17.py
    PYTHONPATH="$REPO:$PYTHONPATH" "$PY" -m specstate.integration.sglang_0_5_17.static17 "$WORK/w" \
      ${V17_STATIC17_SHORT:+--short} >/dev/null || exit 3
    V17_PLAN=$WORK/w/plan-static.txt;;
  esac
  rc=0
  # a plan line: NAME|driver arguments[|VAR=VALUE ...: the engine's environment, e.g. SGLANG_DEBUG_REVERT_PR=N]
  while IFS='|' read -r name args envs; do
    [ -z "$name" ] && continue
    LEFT=$((LIMIT - CONFORM_S - PACK_S - (SECONDS - T0) - 10))
    case "$name" in start-*) [ "$LEFT" -gt "${PROBE_S:-75}" ] && LEFT=${PROBE_S:-75};; esac
    if [ "$LEFT" -lt 20 ]; then echo "[gpu_run_v17] $name: skipped, no time left"; continue; fi
    case "$name" in probe-*) if [ "$LEFT" -lt "${PROBE_MIN_S:-45}" ]; then
      echo "[gpu_run_v17] $name: skipped, $LEFT s left (a probe runs with ${PROBE_MIN_S:-45} s)"; continue; fi;; esac
    echo "[gpu_run_v17] engine $name: $args ${envs:+(environment: $envs) }(host limit $LEFT s)"
    # shellcheck disable=SC2086  # $envs: VAR=VALUE words for env
    PYTHONPATH="$REPO:$PYTHONPATH" env $envs "$PY" -m specstate.integration.sglang_driver run --engine sglang-0.5.17 \
      --patch none --out "$WORK/run/$name" --timeout "$LEFT" $args
    r=$?
    echo "[gpu_run_v17] engine $name: driver exit $r after $((SECONDS - T0)) s"
    case " $envs " in *" V17_EXPECT=crash "*)  # its crash is judged by the conformance, not by the exit
      [ "$r" -ne 0 ] && echo "[gpu_run_v17] engine $name: a crash was expected (see conform.json's crash_verdict)"
      r=0;; esac
    case "$name" in start-*) ;; *) [ "$r" -ne 0 ] && rc=$r;; esac
  done < "$V17_PLAN"
  exit $rc
fi
ARGS=${V17_ARGS:---agree --scenario seed-sweep --random 16 --fuzz-v2 10}
LEFT=$((LIMIT - CONFORM_S - PACK_S - (SECONDS - T0) - 20))
[ "$LEFT" -lt 10 ] && LEFT=10
echo "[gpu_run_v17] driver: $ARGS (host limit $LEFT s)"
cd "$REPO" && PYTHONPATH="$REPO:$PYTHONPATH" "$PY" -m specstate.integration.sglang_driver run --engine sglang-0.5.17 \
  --patch none --out "$WORK/run" --timeout "$LEFT" $ARGS
rc=$?
echo "[gpu_run_v17] driver exit $rc after $((SECONDS - T0)) s"
exit $rc
