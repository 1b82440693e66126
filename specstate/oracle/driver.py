"""The harness around upstream's scheduler loop: feeds a workload in, reads observations out.

Engine-neutral: what it touches of sglang is named in :class:`Release` (one per release adapter).
Upstream's ``event_loop_normal`` runs as it is; only its ``recv_requests`` is replaced: each call
hands over the workload's next ``Arrive`` / ``Abort`` actions (as upstream's own
``TokenizedGenerateReqInput`` / ``AbortReq``) up to and including one ``Step``, so one loop
iteration is one ``Step`` of the model. When the actions run out the loop is left by an exception.
``run_batch`` is wrapped to read the batch before and after the forward; the state after
``process_batch_result`` is read at the next ``recv_requests``. Observations are in
:class:`specstate.integration.backend.Observation`'s vocabulary (as dicts, to cross the process
boundary).
"""

from __future__ import annotations

from typing import Any, Sequence

from specstate.oracle.tokens import EOS, output_token, prompts

__all__ = ["Driver", "WorkloadDone", "Release", "rid_name"]


class WorkloadDone(Exception):
    """Raised from ``recv_requests`` when the workload's actions are used up."""


class Driver:
    """One workload through one scheduler (``attach`` it, then ``run``)."""

    def __init__(self, actions: Sequence[Any], max_accept: int) -> None:
        self.actions = list(actions)
        self.prompts = prompts(self.actions)
        self.max_accept = max_accept
        self.pos = 0
        self.step: Any = None
        self.eos: set[int] = set()
        self.arrived = 0
        self.batch: Any = None
        self.pending: dict[str, Any] | None = None  #: the observation of the iteration in flight
        self.retracted: list[int] = []
        self.observations: list[dict[str, Any]] = []
        self.sched: Any = None
        #: what upstream's scheduler went through (``reached``): retraction, oom-abort, eviction,
        #: chunked-prefill, prefix-hit, abort-waiting / abort-running / abort-chunked
        self.reached: set[str] = set()

    # -- tokens the fake worker returns --------------------------------------------------
    def _next(self, req: Any, j: int) -> int:
        rid = _rid(req)
        if j == 0 and rid in self.eos:
            self.eos.discard(rid)
            return EOS
        return output_token(rid, len(req.output_ids) + j)

    def prefill_tokens(self) -> list[int]:
        """One token per row of the prefill batch (a row whose prefill completes may get EOS)."""
        b = self.batch
        out = []
        for i, req in enumerate(b.reqs):
            done = int(b.prefix_lens[i]) + int(b.extend_lens[i]) == len(req.origin_input_ids) + len(req.output_ids)
            out.append(self._next(req, 0) if done else output_token(_rid(req), len(req.output_ids)))
        return out

    def decode_tokens(self, width: int) -> list[list[int]]:
        """The accepted tokens of every decode row: ``Step.accept`` (rows beyond it accept 1)."""
        accept = self.step.accept if self.step is not None else ()
        rows = []
        for i, req in enumerate(self.batch.reqs):
            a = max(1, min(accept[i] if i < len(accept) else 1, self.max_accept, width))
            rows.append([self._next(req, j) for j in range(a)])
        return rows

    # -- the loop ------------------------------------------------------------------------
    def recv_requests(self, release: "Release") -> list[Any]:
        if self.pending is not None:
            self.pending.update(release.post(self.sched, self.batch))
            self.observations.append(self.pending)
            self.pending = None
        self.retracted = []
        if self.pos >= len(self.actions):
            raise WorkloadDone
        inputs: list[Any] = []
        from specstate.model import Abort, Arrive

        while self.pos < len(self.actions):
            a = self.actions[self.pos]
            self.pos += 1
            if isinstance(a, Arrive):
                inputs.append(release.generate_req(rid_name(self.arrived), self.prompts[self.arrived], a.max_new_tokens))
                self.arrived += 1
            elif isinstance(a, Abort):
                self._classify_abort(a.rid)
                inputs.append(release.abort_req(rid_name(a.rid)))
            else:
                self.step = a
                self.eos |= set(a.eos)
                return inputs
        self.sched.process_input_requests(inputs)  # trailing inputs with no step after them
        raise WorkloadDone

    def _classify_abort(self, rid: int) -> None:
        s = self.sched
        if s.chunked_req is not None and _rid(s.chunked_req) == rid:
            self.reached.add("abort-chunked")
        elif any(_rid(r) == rid for r in s.waiting_queue):
            self.reached.add("abort-waiting")
        elif any(_rid(r) == rid and not r.finished() for r in s.running_batch.reqs):
            self.reached.add("abort-running")

    def around_run_batch(self, release: "Release", run: Any, batch: Any) -> Any:
        self.batch = batch
        kind = "prefill" if batch.forward_mode.is_extend() else "decode"
        obs: dict[str, Any] = {"kind": kind, "rids": [_rid(r) for r in batch.reqs],
                               "path": "extend" if kind == "prefill" else "spec",
                               "retracted": list(self.retracted)}
        if self.retracted:
            self.reached.add("retraction")
        if kind == "prefill":
            obs["extend_lens"] = [int(x) for x in batch.extend_lens]
            if any(int(p) > 0 for p in batch.prefix_lens):
                self.reached.add("prefix-hit")
            if self.sched.chunked_req is not None:
                self.reached.add("chunked-prefill")
            out_before = [len(r.output_ids) for r in batch.reqs]
        result = run(batch)
        obs["seq_lens_after"] = [int(x) for x in batch.seq_lens.tolist()]
        obs["out_lens_after"] = out_before if kind == "prefill" else [len(r.output_ids) for r in batch.reqs]
        if kind == "decode":
            obs["accept_lens"] = [c + 1 for c in getattr(result, "num_correct_drafts_per_req_cpu", None) or []]
        self.pending = obs
        return result

    def finish(self, release: "Release") -> None:
        if self.pending is not None:
            self.pending.update(release.post(self.sched, self.batch))
            self.observations.append(self.pending)
            self.pending = None


class Release:
    """What one release's adapter tells the driver (attribute names moved between releases)."""

    def generate_req(self, rid: str, prompt: list[int], max_new_tokens: int) -> Any:
        raise NotImplementedError

    def abort_req(self, rid: str) -> Any:
        raise NotImplementedError

    def post(self, sched: Any, batch: Any) -> dict[str, Any]:
        """The scheduler after ``process_batch_result``: allocator, tree, requests, queues."""
        alloc, tree = sched.token_to_kv_pool_allocator, sched.tree_cache
        live = [r for r in batch.reqs if not r.finished()]
        chunked = sched.chunked_req
        return {"kv_after": [int(alloc.available_size()), int(tree.evictable_size()), int(tree.protected_size())],
                "req_kv_after": [[int(r.kv_committed_len), int(r.kv_allocated_len)] for r in live],
                "waiting_after": [_rid(r) for r in sched.waiting_queue],
                "chunked_after": _rid(chunked) if chunked is not None else None,
                "ratio_after": round(float(sched.new_token_ratio), 12),
                "batch_is_full_after": bool(sched.running_batch.batch_is_full)}


def rid_name(rid: int) -> str:
    """The request id sent to sglang: fixed width, because ``Scheduler.abort_request`` aborts
    every request whose id *starts with* the one named (``r1`` would abort ``r10`` too)."""
    return f"r{rid:07d}"


def _rid(req: Any) -> int:
    return int(str(req.rid)[1:])
