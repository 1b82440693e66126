"""The DP-attention GPU run (issue 43): its phases, the multi-rank model's prediction for each, and the
judgement of the real outcome against it. Pure (no sglang, no GPU): ``gpu_run_dp.sh`` calls it before
any engine starts (``predict``), for each phase's driver arguments (``args``), and after (``judge``).

    python -m specstate.integration.dp_plan phases --gpus N            # one phase name a line
    python -m specstate.integration.dp_plan predict OUT [PHASE...] --gpus N   # OUT/prediction.json, OUT/wl/*.json
    python -m specstate.integration.dp_plan args OUT PHASE             # the driver's arguments of PHASE
    python -m specstate.integration.dp_plan judge OUT                  # OUT/dp-verdict.json; exit 0 iff every
                                                                       # judged phase came out as predicted

A phase is one engine: ``dp<N>-<shape>-<patch>[-uneven]`` with ``--tp N --dp N --enable-dp-attention``, shape
``seed`` (EAGLE-3, 16 draft tokens, topk 4, 3 steps) or ``topk1`` (4 draft tokens, topk 1, 3 steps),
patch ``naive`` / ``fixed`` (each rank decides on its own batch, ``SPECSTATE_DP_ALLOW=1``) or ``agreed``
(``dp_patch``), threshold 5. Its workloads, in order (a crash or a hang ends the engine, so the
sharpest first; ``-uneven`` swaps the first two, so that naive and fixed fail on the uneven split):

1. ``idle-rank``: ``N x (threshold + 1)`` requests at once, round robin sending rank 0 the long ones
   (32 new tokens) and every other rank short ones (2): every rank over the threshold, then rank 0
   alone over it while the others are idle;
2. ``uneven``: ``N x threshold + 1`` requests at once: rank 0 one over the threshold, the others at it
   (dp 2: 6 vs 5);
3. ``seed-sweep``: the seed's sweep (``workloads.seed_sweep``).

The prediction runs the multi-rank model (``specstate.multirank``: the policy ``dp_patch.POLICY_OF``
names, the phase's shape and ranks) on the same workloads in the same order (each wave's requests
arriving together, round robin continuing across workloads as the engine's controller does, steps
accepting one token a row: random weights accept next to nothing, measured 1.001) and keeps its
first violation: ``crash`` (a rank's worker raises: which ranks, the class, the sglang symbol, PyTorch's
message and its sizes), ``collective-mismatch`` (ranks entering different collectives: each rank's
layout; on the GPU a hang or an error), ``silent`` (only a 1-row graph source broadcast: nothing to see
on the GPU, not judged) or ``clean``.

Assumed, not judged: that requests reach the ranks in the order the driver sends them (one
``async_generate`` each, all at once) and that each wave is admitted in one prefill per rank; where
the engine splits a wave otherwise the iteration differs, not the outcome's kind. What ``judge``
compares: the kind (a predicted crash: each crashing rank one the model crashes, of the modelled class
and sizes; a predicted mismatch: a hang or an error in that workload, each traced rank's last target
forward the model's layout; clean: every workload finished with no crash), the workload it happened in,
where the ranks' decisions parted (``dp_patch.first_disagreement``), and for a run the driver's limit cut
with no rank stuck, the workloads that finished. Rank-by-rank conformance
of the recordings with the model is not done yet (``specstate conform`` replays one rank's recording
on the single-rank model, which has no idle or forced-idle iterations); ``judge`` lists each rank's
recorded paths beside the model's.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Sequence

from specstate.integration.dp_patch import POLICY_OF
from specstate.integration.workloads import Request, Workload, seed_sweep

__all__ = ["Phase", "SHAPES", "PATCHES", "THRESHOLD", "phases", "phase_workloads", "predict_phase", "predict",
           "driver_args", "judge_phase", "judge", "main"]

THRESHOLD = 5
PATCHES = ("naive", "fixed", "agreed")
#: shape -> (speculative_num_steps, speculative_eagle_topk, speculative_num_draft_tokens)
SHAPES = {"seed": (3, 4, 16), "topk1": (3, 1, 4)}
#: the DP target: a tiny dense Qwen3 (its layers gather across DP ranks through ``LayerCommunicator``;
#: the Llama target's layers do not, so DP attention on it would not be the DP path the model shapes)
TARGET = "specstate/integration/sglang_assets/models/target-qwen3"
#: per-phase limits (seconds) and the engine's own: a hang ends in sglang's scheduler watchdog
#: (``--watchdog-timeout``, ``Scheduler.init_watch_dog_memory_saver_input_blocker``) or torch's NCCL
#: timeout (``--dist-timeout``), each well inside the driver's ``--timeout``
WATCHDOG_S = 40
DIST_TIMEOUT_S = 60


@dataclass(frozen=True)
class Phase:
    dp: int
    shape: str
    patch: str
    first: str = "idle-rank"  #: the workload that runs first (``uneven``: the uneven split before the idle rank)

    @property
    def name(self) -> str:
        return f"dp{self.dp}-{self.shape}-{self.patch}" + ("" if self.first == "idle-rank" else f"-{self.first}")

    @property
    def policy(self) -> str:
        return POLICY_OF[self.patch]


def phases(gpus: int) -> list[Phase]:
    """Every phase ``gpus`` GPUs allow: dp 2 (and dp 4 from 4 GPUs), both shapes, the three patches."""
    dps = [d for d in (2, 4) if d <= gpus]
    return [Phase(d, s, p) for d in dps for s in SHAPES for p in PATCHES]


def parse_phase(name: str) -> Phase:
    """``dp<N>-<shape>-<patch>`` (idle-rank first) or ``dp<N>-<shape>-<patch>-uneven`` (the uneven split
    first: where naive and fixed fail on it, not on the idle rank)."""
    m = re.fullmatch(r"dp(\d+)-([a-z0-9]+)-([a-z]+)(?:-(uneven))?", name)
    if not m or m.group(2) not in SHAPES or m.group(3) not in PATCHES:
        raise ValueError(f"Expected a phase dp<N>-<{'|'.join(SHAPES)}>-<{'|'.join(PATCHES)}>[-uneven] but got {name!r}")
    return Phase(int(m.group(1)), m.group(2), m.group(3), m.group(4) or "idle-rank")


def _wave(prefix: str, lens: Sequence[int]) -> tuple[Request, ...]:
    return tuple(Request(f"{prefix}r{i:03d}", 64, n) for i, n in enumerate(lens))


def phase_workloads(dp: int, first: str = "idle-rank") -> list[Workload]:
    """The workloads of a phase, in the order they run."""
    per = THRESHOLD + 1
    idle = Workload("idle-rank", (_wave("i", [32 if i % dp == 0 else 2 for i in range(dp * per)]),))
    uneven = Workload("uneven", (_wave("u", [32] * (dp * THRESHOLD + 1)),))
    return ([uneven, idle] if first == "uneven" else [idle, uneven]) + [seed_sweep()]


def rank_config(phase: Phase) -> Any:
    from specstate.multirank import RankConfig

    return RankConfig(dp_size=phase.dp, tp_size=phase.dp, enable_dp_attention=True)


def model_config(phase: Phase) -> Any:
    """What each rank runs of the phase's launch (``multirank.per_rank_config``: sglang's DP post-init)."""
    from specstate.model import SpecConfig
    from specstate.multirank import per_rank_config

    steps, topk, ndt = SHAPES[phase.shape]
    return per_rank_config(SpecConfig(speculative_num_steps=steps, speculative_eagle_topk=topk,
                                      speculative_num_draft_tokens=ndt, disable_batch_threshold=THRESHOLD),
                           rank_config(phase))


def engine_args(phase: Phase) -> dict[str, Any]:
    steps, topk, ndt = SHAPES[phase.shape]
    return {"model_path": TARGET, "tp_size": phase.dp, "dp_size": phase.dp, "enable_dp_attention": True,
            "speculative_num_steps": steps, "speculative_eagle_topk": topk, "speculative_num_draft_tokens": ndt,
            "watchdog_timeout": WATCHDOG_S, "dist_timeout": DIST_TIMEOUT_S}


def _sizes(msg: str) -> list[int] | None:
    m = _SIZES.search(msg)
    return sorted([int(m.group(1)), int(m.group(2))], reverse=True) if m else None


def _first_failure(vs: list[Any], outcomes: Sequence[Any]) -> tuple[str, list[dict[str, Any]]]:
    """The kind of the model's first violating iteration and each crashing rank's modelled crash
    (``StepOutcome.crash``: class, the sglang symbol that raises, PyTorch's message, its sizes):
    ``crash`` when a rank's worker raises, ``silent`` when the only fault is a 1-row graph source
    that broadcasts (``rank-graph-rows``; nothing fails on the GPU), else ``collective-mismatch``."""
    crashes = [{"rank": r, "cls": o.crash.error_class, "where": o.crash.where, "msg": o.crash.message,
                "sizes": _sizes(o.crash.message)}
               for r, o in enumerate(outcomes) if o is not None and o.crash is not None]
    if crashes:
        return "crash", crashes
    if all(v.invariant == "rank-graph-rows" and "broadcast silently" in v.detail for v in vs):
        return "silent", []
    return "collective-mismatch", []


def predict_phase(phase: Phase) -> dict[str, Any]:
    """The multi-rank model's run of ``phase``'s workloads: its first violation, or clean."""
    from specstate.model import Arrive, Step
    from specstate.multirank import make_model
    from specstate.multirank._run import MultiRun, MultiStop

    model = make_model(model_config(phase), rank_config(phase), phase.policy)
    run = MultiRun(model)
    out: dict[str, Any] = {"phase": phase.name, "dp": phase.dp, "shape": phase.shape, "patch": phase.patch,
                           "policy": phase.policy, "threshold": THRESHOLD, "outcome": "clean"}
    where = None
    try:
        for w in phase_workloads(phase.dp, phase.first):
            for k, wave in enumerate(w.waves):
                where = (w.name, k, len(wave))
                for r in wave:
                    run.apply(Arrive(r.prompt_len, r.max_new_tokens if r.max_new_tokens is not None else 1 << 20))
                for _ in range(10_000):
                    if run.state.is_quiet() and all(s.is_quiet() for s in run.state.ranks):
                        break
                    run.apply(Step())
                run.apply(Step())
    except MultiStop:
        o = run.outcomes[-1]
        kind, crashes = _first_failure(run.violations, o.outcomes)
        it = o.iteration
        out.update(outcome=kind, crashes=crashes, crash_sizes=next((c["sizes"] for c in crashes if c["sizes"]), None),
                   workload=where[0] if where else None,
                   wave=where[1] if where else None, concurrency=where[2] if where else None,
                   step=run.violations[0].step, violations=[v.to_json() for v in run.violations],
                   gathered=list(it.syncs[-1].global_num_tokens) if it else None,
                   ranks=[{"rank": r, "path": p.path, "batch": p.batch, "rows": p.rows, "width": p.width,
                           "collective": cs[-1].describe() if cs else None,
                           "graph": cs[-1].graph if cs else None, "own_rows": cs[-1].own if cs else None}
                          for r, (p, cs) in enumerate(zip(it.paths, it.collectives))] if it else [])
    out["stats"] = dict(run.stats)
    return out


def predict(out_dir: str, gpus: int, only: Sequence[str] = ()) -> dict[str, Any]:
    """``OUT/prediction.json`` (every phase ``gpus`` allow, or those in ``only``) and
    ``OUT/wl/<dp>/*.json`` (the workloads the driver runs)."""
    from specstate.integration.workloads import dump_workload

    chosen = [parse_phase(n) for n in only] if only else phases(gpus)
    preds = {p.name: predict_phase(p) for p in chosen}
    for dp in sorted({p.dp for p in chosen}):
        d = os.path.join(out_dir, "wl", f"dp{dp}")
        os.makedirs(d, exist_ok=True)
        for w in phase_workloads(dp):
            dump_workload(w, os.path.join(d, f"{w.name}.json"))
    doc = {"gpus": gpus, "threshold": THRESHOLD, "phases": preds,
           "assumed": "each wave admitted in one prefill per rank, requests routed round robin in send order, "
                      "accept length 1 (random weights)"}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "prediction.json"), "w") as f:
        json.dump(doc, f, indent=1)
    return doc


def driver_args(out_dir: str, name: str) -> list[str]:
    """The driver's arguments for phase ``name`` (its workloads as written by ``predict``)."""
    ph = parse_phase(name)
    args = ["--patch", ph.patch, "--threshold", str(THRESHOLD), "--rec-mode", "lean"]
    for w in phase_workloads(ph.dp, ph.first):
        args += ["--scenario", os.path.join(out_dir, "wl", f"dp{ph.dp}", f"{w.name}.json")]
    for k, v in engine_args(ph).items():
        args += ["--engine-arg", f"{k}={json.dumps(v)}"]
    return args


# ---------------------------------------------------------------------------------------
# judging a phase's real outcome
# ---------------------------------------------------------------------------------------

_SIZES = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)")
#: a stuck forward's own words: sglang's scheduler watchdog (``utils/watchdog.py::WatchdogRaw._watchdog_once``:
#: ``... watchdog timeout (self.watchdog_timeout=40, ...)``) or torch's NCCL watchdog (``ProcessGroupNCCL``:
#: ``Watchdog caught collective operation timeout: WorkNCCL(SeqNum=.., OpType=.., NumelIn=.., NumelOut=..``);
#: not the word ``watchdog`` alone, which the engine's own argument dump carries
_HANG = re.compile(r"watchdog timeout \(self\.watchdog_timeout=|Watchdog caught collective operation timeout")
_NCCL_WORK = re.compile(r"\[Rank (\d+)\][^\n]*?WorkNCCL\(SeqNum=(\d+), OpType=(\w+)(?:, NumelIn=(\d+), NumelOut=(\d+))?")


def _jsonl(path: str) -> list[dict[str, Any]]:
    out = []
    try:
        with open(path, errors="replace") as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return out


def _rank_of(path: str) -> int | None:
    m = re.search(r"\.rank(\d+)\.jsonl$", path)
    return int(m.group(1)) if m else None


def _crashes(phase_dir: str) -> list[dict[str, Any]]:
    """Every rank's worker crash (``crash.rank<R>.jsonl``): class, message, the two tensor sizes."""
    out = []
    for p in sorted(glob.glob(os.path.join(phase_dir, "crash*.jsonl"))):
        for c in _jsonl(p):
            err = c.get("error") or {}
            out.append({"rank": _rank_of(p), "tag": c.get("tag"), "iter": c.get("iter"), "path": c.get("path"),
                        "cls": err.get("cls"), "msg": str(err.get("msg"))[:300], "sizes": _sizes(str(err.get("msg")))})
    return out


def _recorded_paths(phase_dir: str) -> dict[str, dict[str, dict[str, int]]]:
    """rank -> workload -> the recorded ``fbg`` lines by path."""
    paths: dict[str, dict[str, dict[str, int]]] = {}
    for p in sorted(glob.glob(os.path.join(phase_dir, "rec", "*.rank*.jsonl"))):
        cnt: dict[str, int] = {}
        for r in _jsonl(p):
            if r.get("ev") in ("fbg", "fbg_error"):
                cnt[str(r.get("path"))] = cnt.get(str(r.get("path")), 0) + 1
        paths.setdefault(str(_rank_of(p)), {})[os.path.basename(p).split(".rank")[0]] = cnt
    return paths


def _read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _kind(s: dict[str, Any], crashes: list[Any], hung: bool, limit: bool) -> str:
    if not s:
        return "no-result"
    if (s.get("start_error") or {}).get("cls"):
        return "not-started"
    if crashes:
        return "crash"
    if hung:
        return "hang"
    if limit:
        return "limit"
    return "clean" if s.get("ok") else "error"


def observe_phase(phase_dir: str) -> dict[str, Any]:
    """What the engine did: started or not, crashes per rank (class, message, tensor sizes), hang
    (sglang's or torch's NCCL watchdog, or the driver's limit with a rank stuck in a forward), each
    rank's last breadcrumb, the collectives torch's NCCL watchdog named, each rank's recorded paths."""
    from specstate.integration.dp_patch import first_disagreement, summarize_trace

    try:
        s = json.loads(_read(os.path.join(phase_dir, "summary.json")) or "{}")
    except ValueError:
        s = {}
    log = _read(os.path.join(phase_dir, "host.log"))
    crashes = _crashes(phase_dir)
    lines = {str(_rank_of(p)): _jsonl(p) for p in sorted(glob.glob(os.path.join(phase_dir, "trace", "trace.rank*.jsonl")))}
    traces = {r: summarize_trace(x) for r, x in lines.items()}
    parted = first_disagreement({r: [d for d in x if d.get("ev") == "decide"] for r, x in lines.items()})
    problems = [str(x) for x in s.get("problems", [])]
    limit = any("exceeded --timeout" in x for x in problems)
    stuck = any(t.get("stopped_in") for t in traces.values())
    watchdog = bool(_HANG.search(log)) or any(_HANG.search(x) for x in problems)
    nccl = [{"rank": int(m.group(1)), "seq": int(m.group(2)), "op": m.group(3),
             "numel_in": int(m.group(4)) if m.group(4) else None, "numel_out": int(m.group(5)) if m.group(5) else None}
            for m in _NCCL_WORK.finditer(log)]
    # a hang: sglang's (or NCCL's) watchdog fired, or the driver's limit ended ranks stuck in a forward;
    # the limit alone, every rank between forwards, is a run cut short (``limit``), not a hang
    hung = watchdog or (limit and stuck)
    wls = s.get("workloads", [])
    finished = [w.get("name") for w in wls if not (w.get("verdict") or {}).get("problems")]
    failed_in = next((w.get("name") for w in wls if (w.get("verdict") or {}).get("problems")), None)
    if crashes and crashes[0].get("tag"):
        failed_in = crashes[0]["tag"]
    return {"kind": _kind(s, crashes, hung, limit), "crashes": crashes, "hang": hung, "problems": problems[:10],
            "finished": finished, "failed_in": failed_in, "traces": traces, "nccl_timeouts": nccl[:16],
            "ranks_parted": parted,
            "recorded_paths": _recorded_paths(phase_dir),
            "start_error": s.get("start_error")}


def judge_phase(pred: dict[str, Any], real: dict[str, Any]) -> dict[str, Any]:
    """Real beside predicted: ``as-predicted``, ``NOT as predicted`` (with why) or ``not judged``."""
    kind, want = real["kind"], pred["outcome"]
    why: list[str] = []
    if kind in ("no-result", "not-started"):
        return {"verdict": "not judged", "why": [f"the engine {kind}: {real.get('start_error')}"]}
    if kind == "limit":
        return _judge_cut(pred, real)
    parted = real.get("ranks_parted")
    if want == "clean":
        if kind != "clean":
            why.append(f"predicted clean, got {kind}: {real['problems'][:2] or real['crashes'][:1]}")
        if parted is not None:
            why.append(f"predicted every rank on one path, the ranks parted at call {parted['call']}: {parted['paths']} "
                       f"(gathered {parted['gathered']})")
    elif want == "crash":
        if kind != "crash":
            why.append(f"predicted a crash {pred.get('crash_sizes')} in {pred.get('workload')}, got {kind}")
        else:
            why += _crash_mismatches(pred, real["crashes"])
    elif want == "silent":
        return {"verdict": "not judged", "why": ["the model predicts a 1-row graph source broadcast silently: "
                                                 f"nothing to see on the GPU (real: {kind})"]}
    else:  # collective-mismatch: a hang or an error, never clean
        if kind == "clean":
            why.append(f"predicted ranks in different collectives in {pred.get('workload')} "
                       f"({'; '.join(str(r.get('collective')) for r in pred.get('ranks', []))}), got clean")
        else:
            why += layout_mismatches(pred, real.get("traces") or {})
            if parted is not None and pred.get("gathered") is not None \
                    and any(g != pred["gathered"] for g in parted["gathered"].values()):
                why.append(f"the ranks parted on the gathered list {parted['gathered']}, predicted {pred['gathered']}")
    if want != "clean" and kind != "clean" and real.get("failed_in") and pred.get("workload") != real["failed_in"]:
        why.append(f"workload: predicted {pred.get('workload')}, failed in {real['failed_in']}")
    return {"verdict": "as predicted" if not why else "NOT as predicted", "why": why}


def _judge_cut(pred: dict[str, Any], real: dict[str, Any]) -> dict[str, Any]:
    """A run the driver's limit cut with every rank between forwards: judged on the workloads that
    finished (``judged``), the rest not."""
    done, cut = real.get("finished") or [], real.get("failed_in")
    note = f"the driver's limit cut the run in {cut} with no rank stuck in a forward; judged: {done}"
    parted = real.get("ranks_parted")
    if pred["outcome"] == "clean":
        if parted is not None:
            return {"verdict": "NOT as predicted", "judged": done,
                    "why": [note, f"the ranks parted at call {parted['call']}: {parted['paths']}"]}
        return {"verdict": "as predicted" if done else "not judged", "judged": done, "why": [note]}
    if pred.get("workload") in done:
        return {"verdict": "NOT as predicted", "judged": done,
                "why": [note, f"predicted {pred['outcome']} in {pred['workload']}, which finished"]}
    return {"verdict": "not judged", "judged": done, "why": [note]}


def _crash_mismatches(pred: dict[str, Any], real: list[dict[str, Any]]) -> list[str]:
    """Each rank that crashed must be one the model crashes, with the modelled class and sizes (ranks the
    model crashes too may not get to write theirs: the first crash ends the engine)."""
    out = []
    modelled = {c["rank"]: c for c in pred.get("crashes") or []}
    if not modelled and pred.get("crash_sizes"):  # a prediction written before per-rank crashes were kept
        got = [c["sizes"] for c in real if c["sizes"]]
        return [] if pred["crash_sizes"] in got else [f"crash sizes: predicted {pred['crash_sizes']}, got {got}"]
    for c in real:
        want = modelled.get(c.get("rank"))
        if want is None:
            out.append(f"rank {c.get('rank')} crashed ({c.get('cls')}: {str(c.get('msg'))[:120]}), "
                       f"the model crashes ranks {sorted(modelled)}")
        elif (c.get("cls"), c.get("sizes")) != (want["cls"], want["sizes"]):
            out.append(f"rank {c.get('rank')}: predicted {want['cls']} {want['sizes']} at {want['where']}, "
                       f"got {c.get('cls')} {c.get('sizes')}: {str(c.get('msg'))[:120]}")
    return out


def _predicted_forward(r: dict[str, Any]) -> tuple[str, bool]:
    """The target forward a rank was predicted to enter: its mode and whether it replays a graph."""
    mode = "IDLE" if r.get("batch") == "idle" else "DECODE" if r.get("path") == "plain" else "TARGET_VERIFY"
    return mode, r.get("graph") is not None


def layout_mismatches(pred: dict[str, Any], traces: dict[str, Any]) -> list[str]:
    """Where ranks were predicted to part: each rank's last target forward (its breadcrumb: the mode, and
    graph or eager, ``can_run_dp_cuda_graph`` with a graph runner in place) against the model's layout.
    Ranks without a trace are not judged."""
    out = []
    for r in pred.get("ranks", []):
        fwd = (traces.get(str(r["rank"])) or {}).get("last_target_fwd")
        if fwd is None:
            continue
        mode, graph = _predicted_forward(r)
        real_graph = bool(fwd.get("dp_graph")) and bool(fwd.get("has_graph_runner"))
        if fwd.get("mode") != mode or real_graph != graph:
            out.append(f"rank {r['rank']}: predicted {mode} {'graph' if graph else 'eager'} ({r.get('collective')}), "
                       f"its last target forward was {fwd.get('mode')} {'graph' if real_graph else 'eager'} "
                       f"({fwd.get('rows')} rows)")
    return out


def judge(out_dir: str) -> dict[str, Any]:
    with open(os.path.join(out_dir, "prediction.json")) as f:
        preds = json.load(f)["phases"]
    rows = {}
    for name, pred in preds.items():
        d = os.path.join(out_dir, "run", name)
        if not os.path.isdir(d):
            continue
        real = observe_phase(d)
        rows[name] = {"predicted": pred, "real": real, **judge_phase(pred, real)}
    doc = {"phases": rows, "not_run": sorted(set(preds) - set(rows)),
           "missing": "rank-by-rank conformance of the recordings (recorded paths are listed, not judged)"}
    with open(os.path.join(out_dir, "dp-verdict.json"), "w") as f:
        json.dump(doc, f, indent=1, default=str)
    for name, r in rows.items():
        p = r["predicted"]
        print(f"[dp] {name}: predicted {p['outcome']}" + (f" {p.get('crash_sizes')}" if p.get("crash_sizes") else "")
              + (f" in {p.get('workload')}" if p["outcome"] != "clean" else "")
              + f"; real {r['real']['kind']}" + (f" in {r['real']['failed_in']}" if r['real'].get('failed_in') else "")
              + f": {r['verdict'].upper()}" + (f" ({'; '.join(r['why'])})" if r["why"] else ""))
        for rank, t in sorted(r["real"]["traces"].items()):
            if t.get("stopped_in"):
                print(f"[dp]   rank {rank} stopped in {t['stopped_in']}")
        if r["real"].get("ranks_parted"):
            pt = r["real"]["ranks_parted"]
            print(f"[dp]   the ranks parted at call {pt['call']}: paths {pt['paths']}, gathered {pt['gathered']}")
        for w in r["real"].get("nccl_timeouts", []):
            print(f"[dp]   rank {w['rank']}: NCCL watchdog: {w['op']} #{w['seq']} in {w['numel_in']} out {w['numel_out']}")
    if doc["not_run"]:
        print(f"[dp] not run: {', '.join(doc['not_run'])}")
    return doc


def _describe(pred: dict[str, Any]) -> str:
    if pred["outcome"] == "clean":
        return f"{pred['phase']}: clean ({pred['stats']})"
    head = f"{pred['phase']}: {pred['outcome']}"
    if pred.get("crash_sizes"):
        head += " {} vs {}".format(*pred["crash_sizes"])
    head += f" in {pred['workload']} (C={pred['concurrency']}, step {pred['step']}, gathered {pred['gathered']})"
    head += "".join(f"\n  rank {r['rank']}: {r['path']} ({r['batch']}, {r['rows']} rows) -> {r['collective']}"
                    for r in pred.get("ranks", []))
    return head + "".join(f"\n  rank {c['rank']} raises {c['cls']} at {c['where']}: {c['msg'][:100]}"
                          for c in pred.get("crashes") or [])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specstate.integration.dp_plan")
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("phases")
    a.add_argument("--gpus", type=int, required=True)
    a = sub.add_parser("predict")
    a.add_argument("out")
    a.add_argument("--gpus", type=int, required=True)
    a.add_argument("phase", nargs="*", help="only these phases (default: every phase the GPUs allow)")
    a = sub.add_parser("args")
    a.add_argument("out")
    a.add_argument("phase")
    a = sub.add_parser("judge")
    a.add_argument("out")
    ns = ap.parse_args(argv)
    if ns.cmd == "phases":
        print("\n".join(p.name for p in phases(ns.gpus)))
        return 0
    if ns.cmd == "predict":
        doc = predict(ns.out, ns.gpus, ns.phase)
        for pred in doc["phases"].values():
            print("[dp] predicted " + _describe(pred))
        return 0
    if ns.cmd == "args":
        print(" ".join(driver_args(ns.out, ns.phase)))
        return 0
    doc = judge(ns.out)
    bad = [n for n, r in doc["phases"].items() if r["verdict"] == "NOT as predicted"]
    unjudged = [n for n, r in doc["phases"].items() if r["verdict"] == "not judged"]
    head = "NOT as predicted: " + ", ".join(bad) if bad else "every judged phase as predicted"
    print(f"[dp] VERDICT: {head} ({len(doc['phases']) - len(unjudged)} judged, {len(unjudged)} not judged"
          f"{': ' + ', '.join(unjudged) if unjudged else ''}, {len(doc['not_run'])} not run)")
    return 0 if doc["phases"] and not bad and not unjudged else 1


if __name__ == "__main__":
    sys.exit(main())
