"""The v2 family's counting identities, as the shared invariants check them on v2 states.

Each function takes the state after a step and yields ``(field, expected, actual, rid, detail)``
tuples; ``specstate/invariants/_always.py`` turns them into violations of the invariant that
calls it. What differs from the v1 family and why (sglang 0.5.17):

- ``kv-accounting``: a live request owns *at least* its committed tokens
  (``eagle_utils.py::eagle_prepare_for_decode`` over-allocates ``2 * alloc_len_per_decode``);
  a finished request owns nothing (``mem_cache/common.py::release_kv_cache``) and commits
  nothing after its release (its ``kv_committed_len`` stays as released: at most ``prompt +
  output - 1``; ``Req.reset_for_retract`` zeroes it); a running request
  whose prefill result was processed has ``kv_committed_len == prompt + output - 1`` (requests of
  the prefill still in flight are skipped: their first token is not appended yet); every forward
  wrote KV only below the slots its request owns; ``batch.seq_lens`` is the device's value
  (relayed through ``FutureMap``), not compared with the scheduler's commit.
- ``spec-info-rows``: the running batch's ``EagleDraftInput`` has one ``future_indices`` row per
  batch row, finished rows included (``EagleDraftInput.filter_batch`` drops them at the next
  ``update_running_batch``).
- ``draft-kv-in-step``: before drafting, the draft KV covers *at least* the device's sequence
  length (the draft extend writes the whole window of ``num_draft_tokens``).
"""

from __future__ import annotations

from typing import Iterable, Iterator

from specstate.model.records import ForwardRecord
from specstate.model.request import Req, ReqStatus
from specstate.model.state import ModelState
from specstate.model.sglang_0_5_17.spec_info import EagleDraftInputV2

__all__ = ["request_kv", "in_flight_prefill", "forward_writes", "spec_rows", "draft_kv_covers"]

Finding = tuple[str, object, object, "int | None", str]


def in_flight_prefill(s: ModelState) -> frozenset[int]:
    """The requests of a prefill launched but whose result is not processed yet."""
    pending = s.v2.pending if s.v2 is not None else None
    return frozenset(pending.batch.rids) if pending is not None and pending.kind == "prefill" else frozenset()


def request_kv(s: ModelState, reqs: Iterable[Req] | None = None) -> Iterator[Finding]:
    """Every request's identities (``reqs``: only these, in the order given; the invariant
    passes what a step changed, ``_always.kv_accounting``)."""
    in_flight = in_flight_prefill(s)
    for r in (s.reqs if reqs is None else reqs):
        if r.done and r.kv_allocated_len:
            yield ("req.kv_allocated_len", 0, r.kv_allocated_len, r.rid,
                   f"a {r.status.value} request holds KV (released requests own nothing)")
        if r.done and r.kv_committed_len > max(0, r.prompt_len + r.output_len - 1):
            yield ("req.kv_committed_len", f"<= {max(0, r.prompt_len + r.output_len - 1)}", r.kv_committed_len, r.rid,
                   f"a {r.status.value} request committed tokens after its KV was released")
        if not r.live:
            continue
        if r.kv_allocated_len < r.kv_committed_len:
            yield ("req.kv_allocated_len", f">= {r.kv_committed_len}", r.kv_allocated_len, r.rid, "committed > owned")
        if r.draft_kv_len > r.kv_allocated_len and r.kv_allocated_len:
            yield ("req.draft_kv_len", f"<= {r.kv_allocated_len}", r.draft_kv_len, r.rid, "draft KV past owned slots")
        if r.status == ReqStatus.RUNNING and r.rid not in in_flight and \
                r.kv_committed_len != r.prompt_len + r.output_len - 1:
            yield ("req.kv_committed_len", r.prompt_len + r.output_len - 1, r.kv_committed_len, r.rid,
                   "prompt + output - 1")


def forward_writes(f: ForwardRecord) -> Iterator[Finding]:
    for rid, end, owned in zip(f.rids, f.kv_write_end, f.kv_allocated):
        if end > owned:
            yield (f"{f.phase}.kv_write_end", f"<= {owned} (owned slots)", end, rid,
                   "the forward writes KV past the request's allocation (req_to_token beyond kv_allocated_len)")


def spec_rows(s: ModelState) -> Iterator[Finding]:
    info = s.running.spec_info
    if s.running.is_empty() or not isinstance(info, EagleDraftInputV2):
        return
    if info.rows != s.running.rids:
        yield ("spec_info.rows", list(s.running.rids), list(info.rows), None, "future_indices owners vs batch rows")
    if tuple(info.future_indices) != (s.running.batch_size,):
        yield ("spec_info.future_indices", (s.running.batch_size,), info.future_indices, None, "one row per batch row")


def draft_kv_covers(f: ForwardRecord) -> Iterator[Finding]:
    for rid, want, got in zip(f.rids, f.seq_lens, f.draft_kv_lens):
        if got < want:
            yield ("draft_kv_len", f">= {want}", got, rid, "draft KV behind the device's sequence length")
