"""Conformance: does the model do what the real worker did, step by step?

``recorded_workload`` turns a recorded real run (the recorder's ``fbg`` lines) into model
actions: requests ``Arrive`` just before the prefill that first shows them (prompt length
from the record, ``max_new_tokens`` from the length they finished at), and every iteration
is a ``Step`` carrying the real accept lengths. ``ModelBackend`` replays those actions and
``RecordedBackend`` reads the same iterations from the file, both as
:class:`~specstate.integration.backend.Observation`; ``compare`` reports the first
mismatch with both sides. ``recorded_invariants`` checks the invariant families directly on
the recorded states (token counts per forward, ``spec_info`` rows, mode consistency).

Only this module and ``backend.py`` know both vocabularies; nothing here imports sglang.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Iterable, Iterator

from specstate.integration.backend import Fwd, Observation
from specstate.model import Abort, Arrive, SpecConfig, Step, StepOutcome, Worker, get_variant

__all__ = ["load_records", "config_from_header", "recorded_workload", "RecordedBackend", "ModelBackend",
           "Mismatch", "compare", "recorded_invariants", "check_recording"]

_SIZES = re.compile(r"\((\d+)\)")


def load_records(path: Path | str) -> list[dict[str, Any]]:
    p = Path(path)
    opener = gzip.open if p.suffix == ".gz" else open
    with opener(p, "rt") as f:  # type: ignore[operator]
        return [json.loads(line) for line in f if line.strip()]


def config_from_header(header: dict[str, Any], threshold: int | None) -> SpecConfig:
    sa = header.get("server_args") or {}
    target = (header.get("graph_runners") or {}).get("target") or {}
    return SpecConfig(
        speculative_num_steps=int(sa.get("speculative_num_steps") or header["speculative_num_steps"]),
        speculative_eagle_topk=int(sa.get("speculative_eagle_topk") or header["topk"]),
        speculative_num_draft_tokens=int(sa.get("speculative_num_draft_tokens") or header["speculative_num_draft_tokens"]),
        disable_batch_threshold=threshold,
        cuda_graph_max_bs=int(sa.get("cuda_graph_max_bs") or 16),
        cuda_graph_bs_override=tuple(target["capture_bs"]) if target.get("capture_bs") else None,
        max_running_requests=int(sa.get("max_running_requests") or 48),
        target_kv_pool_size=int(header.get("kv_size") or 1 << 24),
        draft_kv_pool_size=int(header.get("kv_size") or 1 << 24),
        chunked_prefill_size=int(sa.get("chunked_prefill_size") or 8192),
        target_hidden_size=256, draft_hidden_size=256, num_aux_hidden_states=3,
    )


def _iterations(records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for r in records:
        if r.get("ev") in ("fbg", "fbg_error") and r.get("path") != "idle" and r.get("bs"):
            yield r


@dataclass
class RecordedWorkload:
    actions: list[Any]
    rid_index: dict[str, int]
    iterations: list[dict[str, Any]]


def _final_lengths(records: list[dict[str, Any]]) -> dict[str, int]:
    """``max_new_tokens`` per rid: the output length it finished at with ``FINISH_LENGTH``
    (from ``post`` lines, written after ``process_batch_result``, so requests finishing at
    their prefill are seen too; older recordings without ``post`` fall back to ``fbg``)."""
    out: dict[str, int] = {}
    for r in records:
        if r.get("ev") == "post":
            rids, lens, fins = r.get("rids", []), r.get("out_len", []), r.get("finished", [])
        elif r.get("ev") == "fbg":
            after = r.get("reqs_after") or {}
            rids, lens, fins = after.get("rid", []), after.get("out_len", []), after.get("finished", [])
        else:
            continue
        for rid, n, fin in zip(rids, lens, fins):
            if fin == "FINISH_LENGTH" and rid not in out:
                out[rid] = int(n)
    return out


def recorded_workload(records: list[dict[str, Any]]) -> RecordedWorkload:
    """The model actions that reproduce a recorded run: ``Arrive`` just before the prefill
    that first shows a request, ``Abort`` where the recorder saw ``abort_request``, one
    ``Step`` with the real accept lengths per iteration that ran a batch."""
    its = list(_iterations(records))
    finished_at = _final_lengths(records)
    aborts = sorted((int(r.get("iter") or 0), str(r["rid"])) for r in records if r.get("ev") == "abort")
    rid_index: dict[str, int] = {}
    actions: list[Any] = []
    pending = 0
    for r in its:
        it = int(r.get("iter") or 0)
        while pending < len(aborts) and aborts[pending][0] < it:
            rid = aborts[pending][1]
            if rid in rid_index:
                actions.append(Abort(rid_index[rid]))
            pending += 1
        before = r.get("reqs_before") or {}
        for rid, plen in zip(before.get("rid", []), before.get("prompt_len", [])):
            if rid not in rid_index:
                rid_index[rid] = len(rid_index)
                actions.append(Arrive(int(plen), finished_at.get(rid, 1 << 20)))
        accept = (r.get("result") or {}).get("accept_lens") or ()
        actions.append(Step(accept=tuple(int(a) for a in accept)))
    return RecordedWorkload(actions, rid_index, its)


def _spec_shapes(desc: dict[str, Any] | None) -> tuple[Any, ...]:
    if not desc:
        return (None,)
    f = desc.get("fields") or {}

    def s(name: str) -> tuple[int, ...] | None:
        v = f.get(name)
        return tuple(v["s"]) if isinstance(v, dict) and "s" in v else None

    return (desc.get("cls"), s("topk_p"), s("topk_index"), s("hidden_states"), s("bonus_tokens"))


def _rec_fwds(r: dict[str, Any]) -> tuple[Fwd, ...]:
    out: list[Fwd] = []
    for ev in r.get("events") or []:
        if ev.get("ev") != "fwd":
            continue
        g = ev.get("graph")
        graph = g.get("padded_bs") if g and (ev.get("graph_ran") or str(ev.get("via", "")).startswith("graph")) else None
        mode = ev.get("mode")
        drafting = ev.get("worker") == "draft" and mode == "DECODE"
        f = Fwd(ev.get("worker"), mode, int(ev.get("bs") or 0),
                None if drafting else (ev.get("input_ids") or [None])[0], graph)
        if drafting and out and out[-1] == f:
            continue  # the eager draft loop runs the draft runner steps - 1 times
        out.append(f)
    return tuple(out)


class RecordedBackend:
    """Observations read from the recorder's JSON lines."""

    name = "recorded"

    def observe(self, workload: RecordedWorkload) -> list[Observation]:
        out = []
        for r in workload.iterations:
            idx = tuple(workload.rid_index[x] for x in r.get("rids", []))
            after = r.get("reqs_after") or {}
            crash = None
            if r.get("ev") == "fbg_error":
                err = r.get("error") or {}
                crash = (str(err.get("cls")), tuple(int(x) for x in _SIZES.findall(err.get("msg", ""))))
            seq = (r.get("after") or {}).get("seq_lens") or ()
            out.append(Observation(
                kind="prefill" if r.get("mode_in") in ("EXTEND", "MIXED") else "decode",
                rids=idx, path=_norm_path(r.get("path")),
                accept_lens=tuple((r.get("result") or {}).get("accept_lens") or ()),
                seq_lens_after=tuple(seq) if crash is None else (),
                out_lens_after=tuple(after.get("out_len", ())) if crash is None else (),
                spec_after=_spec_shapes((r.get("after") or {}).get("spec_info")) if crash is None else (),
                forwards=_rec_fwds(r), crash=crash, extra={"iter": r.get("iter")}))
        return out


def _norm_path(p: str | None) -> str:
    if p in ("spec", "extend"):
        return p
    return "fallback" if p in ("fallback", "naive", "naive_graph", "naive_eager") or (p or "").startswith("naive") else (p or "?")


def _model_fwds(o: StepOutcome) -> tuple[Fwd, ...]:
    out = []
    for f in o.forwards:
        drafting = f.worker == Worker.DRAFT and f.forward_mode.value == "DECODE"
        out.append(Fwd(f.worker.value, f.forward_mode.value, f.batch_size, None if drafting else f.input_ids[0],
                       f.graph.padded_bs if f.graph else None))
    return tuple(out)


class ModelBackend:
    """Observations from replaying the recorded actions on the model."""

    name = "model"

    def __init__(self, config: SpecConfig, variant: str) -> None:
        self.config = config
        self.variant = get_variant(variant)

    def observe(self, workload: RecordedWorkload) -> list[Observation]:
        from specstate.model import initial_state, step

        ops = self.variant.ops()
        state = initial_state(self.variant.configure(self.config))
        out: list[Observation] = []
        for a in workload.actions:
            o = step(state, a, ops)
            state = o.state
            if isinstance(a, Step) and o.batch_kind in ("prefill", "decode"):
                out.append(self._obs(o))
                if o.crash is not None:
                    break
        return out

    def _obs(self, o: StepOutcome) -> Observation:
        fwds = _model_fwds(o)
        if o.crash is not None:
            sizes = [v[0] for _, v in sorted(o.crash.shapes.items()) if isinstance(v, list) and v and isinstance(v[0], int)]
            crash = (o.crash.error_class, tuple(sorted(sizes, reverse=True)))
            return Observation(kind=o.batch_kind, rids=o.batch_rids, path=_model_path(o), forwards=fwds, crash=crash)
        s = o.state
        batch = s.last_batch if o.batch_kind == "prefill" else s.running
        assert batch is not None
        spec = batch.spec_info
        spec_after = (type(spec).__name__, getattr(spec, "topk_p", None), getattr(spec, "topk_index", None),
                      getattr(spec, "hidden_states", None), getattr(spec, "bonus_tokens", None)) if spec is not None else (None,)
        path = _model_path(o)
        accept: tuple[int, ...] = ()
        if path == "spec":
            accept = tuple(s.req(r).output_len - o.before.req(r).output_len for r in o.batch_rids)
        # the recorder reads requests at forward_batch_generation's exit, before
        # process_batch_result_prefill appends the prefill's token
        lens_from = o.before if o.batch_kind == "prefill" else s
        return Observation(
            kind=o.batch_kind, rids=o.batch_rids, path=path, accept_lens=accept, seq_lens_after=batch.seq_lens,
            out_lens_after=tuple(lens_from.req(r).output_len for r in batch.rids), spec_after=spec_after, forwards=fwds)


def _model_path(o: StepOutcome) -> str:
    if o.batch_kind == "prefill":
        return "extend"
    return "spec" if any(f.phase == "draft" for f in o.forwards) else "fallback"


@dataclass(frozen=True)
class Mismatch:
    index: int  #: iteration index (0-based, over iterations that ran a batch)
    field: str
    model: Any
    real: Any
    real_iter: Any

    def describe(self) -> str:
        return f"iteration {self.index} (real iter {self.real_iter}): {self.field}: model {self.model!r} vs real {self.real!r}"


def compare(model: list[Observation], real: list[Observation], *, accept_from_real: bool = True) -> list[Mismatch]:
    """Field-by-field, iteration by iteration; returns mismatches (the first is the report)."""
    out: list[Mismatch] = []
    if len(model) != len(real):
        out.append(Mismatch(min(len(model), len(real)), "iterations", len(model), len(real), None))
    for i, (m, r) in enumerate(zip(model, real)):
        for f in fields(Observation):
            if f.name in ("extra",) or (f.name == "accept_lens" and accept_from_real):
                continue
            mv, rv = getattr(m, f.name), getattr(r, f.name)
            if f.name == "crash" and mv and rv:
                rv = (rv[0], tuple(sorted(rv[1], reverse=True)))
            if mv != rv:
                out.append(Mismatch(i, f.name, mv, rv, r.extra.get("iter")))
    return out


def recorded_invariants(records: list[dict[str, Any]], topk: int) -> list[str]:
    """Invariant families checked on the recorded states themselves."""
    bad: list[str] = []
    for r in _iterations(records):
        if r.get("ev") == "fbg_error":
            bad.append(f"iter {r.get('iter')}: worker-crash: {r['error'].get('cls')}: {r['error'].get('msg', '')[:120]}")
            continue
        for ev in r.get("events") or []:
            if ev.get("ev") != "fwd" or ev.get("worker") != "target":
                continue
            n, mode = (ev.get("input_ids") or [0])[0], ev.get("mode")
            loc = (ev.get("out_cache_loc") or [None])[0]
            if loc is not None and loc != n:
                bad.append(f"iter {r.get('iter')}: token-counts: target {mode} out_cache_loc {loc} != input_ids {n}")
            if mode == "TARGET_VERIFY" and ev.get("spec") != "EagleVerifyInput":
                bad.append(f"iter {r.get('iter')}: mode-consistency: TARGET_VERIFY with {ev.get('spec')}")
            if mode == "DECODE" and ev.get("spec") is not None:
                bad.append(f"iter {r.get('iter')}: mode-consistency: target DECODE with {ev.get('spec')} attached")
            g = ev.get("graph")
            if g and ev.get("graph_ran") and g.get("raw_num_token") not in (None, n):
                bad.append(f"iter {r.get('iter')}: mode-consistency: graph expects {g.get('raw_num_token')} tokens, got {n}")
        after = r.get("reqs_after") or {}
        unfinished = sum(1 for f in after.get("finished", []) if not f)
        spec = _spec_shapes((r.get("after") or {}).get("spec_info"))
        if spec[0] == "EagleDraftInput" and r.get("mode_in") == "DECODE":
            for name, shp in zip(("topk_p", "topk_index", "hidden_states", "bonus_tokens"), spec[1:]):
                if shp is not None and shp[0] != unfinished:
                    bad.append(f"iter {r.get('iter')}: spec-info-rows: {name} rows {shp[0]} != unfinished {unfinished}")
            if spec[1] is not None and len(spec[1]) > 1 and spec[1][1] != topk:
                bad.append(f"iter {r.get('iter')}: spec-info-rows: topk_p width {spec[1][1]} != topk {topk}")
    return bad


def check_recording(path: Path | str, variant: str, threshold: int | None) -> dict[str, Any]:
    """Everything for one recorded file: invariants on recorded states and conformance."""
    records = load_records(path)
    header = next((r for r in records if r.get("ev") == "header"), None)
    if header is None:
        raise ValueError(f"Expected a header record in {path}")
    config = config_from_header(header, threshold)
    wl = recorded_workload(records)
    real = RecordedBackend().observe(wl)
    model = ModelBackend(config, variant).observe(wl)
    mism = compare(model, real)
    return {"file": str(path), "iterations": len(real), "requests": len(wl.rid_index),
            "recorded_invariant_violations": recorded_invariants(records, config.speculative_eagle_topk),
            "mismatches": [m.describe() for m in mism[:5]], "mismatch_count": len(mism),
            "real_crash": next((o.crash for o in real if o.crash), None),
            "model_crash": next((o.crash for o in model if o.crash), None)}
