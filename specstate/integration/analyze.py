"""Read recorder JSONL (``docs/gpu.md``) and check what every decode step did (pure Python).

``analyze_records(records)`` returns counts by path, accept lengths, the switches between
consecutive decode steps (``switch_off``: a ``spec`` step followed by a ``fallback`` step, the
batch grew above the threshold; ``resume``: ``fallback`` followed by ``spec``, the batch
shrank to the threshold or below and speculation resumed; a prefill may sit between the two
decode steps), the accept lengths of the first speculative step after each resume, and the
failures of these per-step checks (page size 1, one scheduler, no retraction; at page size > 1
``kv_available`` is not checked; a record of the
``lean`` / ``deferred`` recorder modes has no entry snapshot of lengths: only ``kv_vs_seq`` and
``spec_rows`` apply to it):

- ``out_len``:       ``len(output_ids)`` grows by the step's accept length, per request;
- ``kv_committed``:  ``kv_committed_len`` grows by the accept length;
- ``seq_lens``:      ``seq_lens`` grows by the accept length (GPU and CPU copies equal);
- ``seq_vs_out``:    ``seq_lens == prompt_len + len(output_ids) - 1`` after the step;
- ``kv_vs_seq``:     ``kv_committed_len == seq_lens`` after the step;
- ``kv_available``:  the allocator's free slots drop by exactly the sum of accept lengths
                     (finished requests are released later, by the scheduler);
- ``spec_rows``:     after the step ``batch.spec_info`` is an ``EagleDraftInput`` with one
                     row per unfinished request (or an idle one with 0 rows);
- ``fallback_eager``: in a fallback step no target forward replays a CUDA graph, and the
                     target forward is DECODE with one token per request.

Usage: ``python -m specstate.integration.analyze REC.jsonl [...]`` prints JSON.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable

__all__ = ["analyze_records", "check_step", "pressure_counts", "main"]

DECODE_PATHS = ("spec", "fallback", "naive")
MAX_FAILURES = 50


def _rows(spec: dict[str, Any] | None) -> int | None:
    if not spec:
        return None
    f = spec.get("fields", {})
    for k in ("topk_p", "bonus_tokens", "topk_index"):
        v = f.get(k)
        if isinstance(v, dict) and v.get("s"):
            return int(v["s"][0])
    return None


def check_step(r: dict[str, Any]) -> list[dict[str, Any]]:
    """The failures of the per-step checks for one ``fbg`` decode record."""
    fails: list[dict[str, Any]] = []

    def fail(check: str, **detail: Any) -> None:
        fails.append({"iter": r.get("iter"), "tag": r.get("tag"), "path": r.get("path"), "check": check, **detail})

    res = r.get("result") or {}
    acc = res.get("accept_lens")
    rb, ra = r.get("reqs_before") or {}, r.get("reqs_after") or {}
    b, a = r.get("before") or {}, r.get("after") or {}
    bs = r.get("bs") or 0
    if acc is None or len(acc) != bs:
        fail("accept_lens", got=acc, bs=bs)
        return fails
    if "out_len" not in rb:  # a lean / deferred record: only what the exit snapshot holds
        return fails + _compact_checks(r, ra, a)
    for i in range(bs):
        n = acc[i]
        try:
            if ra["out_len"][i] - rb["out_len"][i] != n:
                fail("out_len", i=i, rid=ra["rid"][i], before=rb["out_len"][i], after=ra["out_len"][i], accept=n)
            if ra["kv_committed"][i] - rb["kv_committed"][i] != n:
                fail("kv_committed", i=i, rid=ra["rid"][i], before=rb["kv_committed"][i], after=ra["kv_committed"][i], accept=n)
            if a["seq_lens"][i] - b["seq_lens"][i] != n:
                fail("seq_lens", i=i, rid=ra["rid"][i], before=b["seq_lens"][i], after=a["seq_lens"][i], accept=n)
            if a["seq_lens"][i] != a["seq_lens_cpu"][i]:
                fail("seq_lens_cpu", i=i, gpu=a["seq_lens"][i], cpu=a["seq_lens_cpu"][i])
            if a["seq_lens"][i] != ra["prompt_len"][i] + ra["out_len"][i] - 1:
                fail("seq_vs_out", i=i, rid=ra["rid"][i], seq=a["seq_lens"][i], prompt=ra["prompt_len"][i], out=ra["out_len"][i])
            if ra["kv_committed"][i] != a["seq_lens"][i]:
                fail("kv_vs_seq", i=i, rid=ra["rid"][i], kv=ra["kv_committed"][i], seq=a["seq_lens"][i])
        except (KeyError, IndexError, TypeError) as e:
            fail("record_shape", error=repr(e))
            break
    kb, ka = (r.get("kv_before") or {}).get("available"), (r.get("kv_after") or {}).get("available")
    if kb is not None and ka is not None and kb - ka != sum(acc):
        fail("kv_available", before=kb, after=ka, accept_sum=sum(acc))
    unfinished = sum(1 for x in (ra.get("finished") or []) if x is None)
    spec = a.get("spec_info") or {}
    rows = _rows(spec)
    if spec.get("cls") != "EagleDraftInput" or rows != unfinished:
        fail("spec_rows", cls=spec.get("cls"), rows=rows, unfinished=unfinished)
    if r.get("path") == "fallback":
        for ev in r.get("events", []):
            if ev.get("ev") == "fwd" and ev.get("worker") == "target":
                if ev.get("graph_ran") or ev.get("mode") != "DECODE" or (ev.get("input_ids") or [None])[0] != bs:
                    fail("fallback_eager", mode=ev.get("mode"), graph_ran=ev.get("graph_ran"), input_ids=ev.get("input_ids"))
    return fails


def _compact_checks(r: dict[str, Any], ra: dict[str, Any], a: dict[str, Any]) -> list[dict[str, Any]]:
    """``kv_vs_seq`` and ``spec_rows`` on a record of the compact recorder modes (no entry
    snapshot of lengths, no GPU ``seq_lens``: its ``seq_lens`` is the CPU copy)."""
    fails = []
    seq, kv = a.get("seq_lens") or [], ra.get("kv_committed") or []
    for i, (k, q) in enumerate(zip(kv, seq)):
        if k != q:
            fails.append({"iter": r.get("iter"), "path": r.get("path"), "check": "kv_vs_seq", "i": i, "kv": k, "seq": q})
    unfinished = sum(1 for x in (ra.get("finished") or []) if x is None)
    spec = a.get("spec_info") or {}
    if spec.get("cls") != "EagleDraftInput" or _rows(spec) != unfinished:
        fails.append({"iter": r.get("iter"), "path": r.get("path"), "check": "spec_rows", "cls": spec.get("cls"),
                      "rows": _rows(spec), "unfinished": unfinished})
    return fails


@dataclass
class _Tally:
    """What ``analyze_records`` counts over the ``fbg`` lines, in recording order."""

    paths: dict[str, int] = field(default_factory=dict)
    hist: dict[str, dict[str, int]] = field(default_factory=dict)
    acc_sum: dict[str, float] = field(default_factory=dict)
    acc_n: dict[str, int] = field(default_factory=dict)
    bs_by_path: dict[str, list[int]] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)
    n_fail: int = 0
    switch_off: int = 0
    resume: int = 0
    resumed: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    prev_decode_path: str | None = None
    want_resume: bool = False
    #: page size > 1: ``kv_available`` does not apply (slots are taken and freed a page at a time:
    #: ``PagedTokenToKVPoolAllocator``; conformance compares the allocator with the paged model)
    paged: bool = False

    def add(self, r: dict[str, Any]) -> None:
        p = r.get("path") or "?"
        self.paths[p] = self.paths.get(p, 0) + 1
        self.bs_by_path.setdefault(p, []).append(r.get("bs") or 0)
        if r.get("ev") == "fbg_error":
            err = r.get("error") or {}
            self.errors.append({"iter": r.get("iter"), "path": p, "cls": err.get("cls"), "msg": err.get("msg")})
            return
        if p in DECODE_PATHS:
            self._decode(r, p)

    def _decode(self, r: dict[str, Any], p: str) -> None:
        acc = (r.get("result") or {}).get("accept_lens") or []
        h = self.hist.setdefault(p, {})
        for n in acc:
            h[str(n)] = h.get(str(n), 0) + 1
        self.acc_sum[p] = self.acc_sum.get(p, 0.0) + sum(acc)
        self.acc_n[p] = self.acc_n.get(p, 0) + len(acc)
        if self.prev_decode_path == "spec" and p == "fallback":
            self.switch_off += 1
        if self.prev_decode_path == "fallback" and p == "spec":
            self.resume += 1
            self.want_resume = True
        if self.want_resume and p == "spec":
            self.resumed.append({"iter": r.get("iter"), "bs": r.get("bs"), "accept_lens": acc})
            self.want_resume = False
        self.prev_decode_path = p
        fl = [f for f in check_step(r) if not (self.paged and f["check"] == "kv_available")]
        self.n_fail += len(fl)
        self.failures.extend(fl[: max(0, MAX_FAILURES - len(self.failures))])

    def mean(self, p: str) -> float | None:
        return round(self.acc_sum[p] / self.acc_n[p], 4) if self.acc_n.get(p) else None


def analyze_records(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    records = list(records)
    recs = [r for r in records if r.get("ev") in ("fbg", "fbg_error")]
    posts = [r for r in records if r.get("ev") == "post"]
    aborts = [r.get("rid") for r in records if r.get("ev") == "abort"]
    finished_at_prefill = [rid for p in posts if p.get("mode") == "EXTEND"
                           for rid, f in zip(p.get("rids", []), p.get("finished", [])) if f is not None]
    header = next((r for r in records if r.get("ev") == "header"), {})
    t = _Tally(paged=int((header.get("server_args") or {}).get("page_size") or header.get("page_size") or 1) > 1)
    for r in recs:
        t.add(r)
    return {
        "fbg_records": len(recs),
        "paths": t.paths,
        "errors": t.errors,
        "accept_len_hist": t.hist,
        "mean_accept_len": {p: t.mean(p) for p in t.acc_sum if t.acc_n.get(p)},
        "mean_accept_len_spec": t.mean("spec"),
        "bs_range": {p: [min(v), max(v)] for p, v in t.bs_by_path.items() if v},
        "switch_off": t.switch_off,
        "resume": t.resume,
        "resumed": t.resumed[:40],
        "n_resumed": len(t.resumed),
        "n_post": len(posts),
        "aborts": aborts,
        "finished_at_prefill": finished_at_prefill[:200],
        "n_check_failures": t.n_fail,
        "check_failures": t.failures,
    }


def pressure_counts(records: Iterable[dict[str, Any]]) -> dict[str, int]:
    """What memory pressure made the real scheduler do in one recording (schema /2):

    - ``retractions``: requests ``retract_decode`` took back (``retract`` lines);
    - ``chunked_requests``: requests prefilled in more than one chunk (``Scheduler.chunked_req``);
    - ``chunks``: prefill iterations that ended with a chunked request in flight;
    - ``prefix_hits``: admissions that reused KV from the radix tree (a request's first
      prefill, or its re-prefill after a retraction, with ``prefix_len > 0``);
    - ``prefix_tokens``: the tokens those hits did not have to prefill.
    """
    out = {"retractions": 0, "chunked_requests": 0, "chunks": 0, "prefix_hits": 0, "prefix_tokens": 0}
    fresh: set[str] = set()  # admitted and not retracted since
    chunked: set[str] = set()
    for r in records:
        ev = r.get("ev")
        if ev == "retract":
            out["retractions"] += len(r.get("retracted") or ())
            fresh -= set(r.get("retracted") or ())
        elif ev == "post" and (r.get("sched") or {}).get("chunked") and r.get("mode") == "EXTEND":
            out["chunks"] += 1
            chunked.add(r["sched"]["chunked"])
        elif ev == "fbg" and r.get("mode_in") == "EXTEND":
            before = r.get("reqs_before") or {}
            for rid, pre in zip(before.get("rid", []), before.get("prefix_len", [])):
                if rid not in fresh and pre:
                    out["prefix_hits"] += 1
                    out["prefix_tokens"] += int(pre)
                fresh.add(rid)
    out["chunked_requests"] = len(chunked)
    return out


def _read(path: str) -> list[dict[str, Any]]:
    import gzip

    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out = {p: analyze_records(_read(p)) for p in argv}
    print(json.dumps(out, indent=1))
    return 0 if all(v["n_check_failures"] == 0 and not v["errors"] for v in out.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
