"""A sglang 0.5.12 recording (schema /2, the ``lean`` lines conformance reads) written from a model
run instead of a GPU: what ``integration/sglang_recorder.py`` would write had the real worker done
exactly what the model does. Conformance of such a file with the same variant must find nothing;
a file with one field changed must be caught. (Test helper: issue 39's paged conformance.)

The writer follows ``conformance.ModelBackend.observe`` step for step, including its tentative
idle steps (an arrival that saw an empty running batch after an iteration; a full batch whose
rows all finished: ``_idles_next``), so that replaying the file takes the model down the same path.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from specstate.check import checked_step
from specstate.integration.sglang_0_5_12.conformance import _idles_next, _model_fwds, _model_path
from specstate.integration.sglang_0_5_12.recording import RECORD_MODELS
from specstate.model import Arrive, SpecConfig, Step, get_variant, initial_state


def header(config: SpecConfig) -> dict[str, Any]:
    """The recorder's header (``Recorder.header``) for ``config``."""
    sa = {"speculative_algorithm": "EAGLE3", "speculative_eagle_topk": config.speculative_eagle_topk,
          "speculative_num_steps": config.speculative_num_steps,
          "speculative_num_draft_tokens": config.speculative_num_draft_tokens, "disable_overlap_schedule": True,
          "attention_backend": "triton", "cuda_graph_max_bs": config.cuda_graph_max_bs,
          "max_running_requests": config.max_running_requests, "page_size": config.page_size,
          "disable_radix_cache": config.disable_radix_cache, "chunked_prefill_size": config.chunked_prefill_size,
          "max_prefill_tokens": config.max_prefill_tokens, "max_total_tokens": config.target_kv_pool_size,
          "schedule_policy": "fcfs", "schedule_conservativeness": config.schedule_conservativeness}
    target = {"capture_bs": list(config.cuda_graph_bs_override)} if config.cuda_graph_bs_override else {}
    return {"ev": "header", "schema": "specstate-sglang-rec/2", "sglang": "0.5.12", "tag": "model",
            "worker": "sglang.srt.speculative.eagle_worker.EAGLEWorker", "topk": config.speculative_eagle_topk,
            "speculative_num_steps": config.speculative_num_steps,
            "speculative_num_draft_tokens": config.speculative_num_draft_tokens, "page_size": config.page_size,
            "server_args": sa, "graph_runners": {"target": target}, "kv_size": config.target_kv_pool_size, "env": {}}


def _shape(v: Any) -> dict[str, Any] | None:
    return {"s": list(v)} if v is not None else None


def _fwd_event(f: Any) -> dict[str, Any]:
    ev: dict[str, Any] = {"ev": "fwd", "worker": f.worker, "mode": f.mode, "bs": f.bs, "graph_ran": f.graph is not None,
                          "spec": "EagleVerifyInput" if f.mode == "TARGET_VERIFY" else None}
    if f.tokens is not None:
        ev["input_ids"] = [f.tokens]
    if f.loc is not None:
        ev["out_cache_loc"] = [f.loc]
    if f.seq_lens is not None:
        ev["seq_lens_cpu"] = list(f.seq_lens)
    if f.graph is not None:
        ev["graph"] = {"padded_bs": f.graph}
    return ev


class _Writer:
    def __init__(self, config: SpecConfig, variant: str) -> None:
        self.v = get_variant(variant)
        self.ops = self.v.ops()
        self.state = initial_state(self.v.configure(config))
        self.lines: list[dict[str, Any]] = [header(config)]
        self.it = 0
        self.gap_open = False
        self.full_idle = False  # the last post says the scheduler loops idle before the next iteration
        self.n = 0  # actions taken (the replay's action index)

    def name(self, rid: int) -> str:
        return f"m{rid:04d}"

    def sched(self) -> dict[str, Any]:
        s = self.state
        return {"waiting": [self.name(r) for r in s.waiting], "running": [self.name(r) for r in s.running.rids],
                "batch_is_full": bool(s.running.batch_is_full),
                "chunked": self.name(s.chunked_rid) if s.chunked_rid is not None else None,
                "new_token_ratio": s.new_token_ratio}

    def kv(self) -> dict[str, Any]:
        s = self.state
        return {"available": s.kv_available, "evictable": s.tree.evictable, "protected": s.tree.protected}

    def tentative_idle(self) -> None:
        o = checked_step(self.state, Step(), self.ops, self.v, self.n)
        if o.batch_kind == "idle":
            self.state = o.state

    def arrive(self, a: Arrive) -> None:
        if self.gap_open and not self.state.running.rids:
            self.tentative_idle()
        self.gap_open = False
        rid = self.n_arrived()
        o = checked_step(self.state, a, self.ops, self.v, self.n)
        self.lines.append({"ev": "arrive", "iter": self.it, "rid": self.name(rid), "prompt_len": a.prompt_len,
                           "max_new_tokens": a.max_new_tokens, "lcp": a.shared_len if a.prefix_of is not None else 0,
                           "lcp_rid": self.name(a.prefix_of) if a.prefix_of is not None else None,
                           "kv": self.kv(), "sched": self.sched()})
        self.state = o.state
        self.n += 1

    def n_arrived(self) -> int:
        return sum(1 for r in self.lines if r.get("ev") == "arrive")

    def step(self, accept: tuple[int, ...]) -> bool:
        """One iteration; ``False`` (and nothing written, nothing changed) if the model idles."""
        before = self.state
        if self.full_idle:
            self.tentative_idle()
        o = checked_step(self.state, Step(accept=accept), self.ops, self.v, self.n)
        if o.batch_kind not in ("prefill", "decode"):
            self.state = before
            return False
        assert o.crash is None, o.crash
        self.full_idle = False
        s = o.state
        batch = s.last_batch if o.batch_kind == "prefill" else s.running
        path = _model_path(o)
        self.it += 1
        for e in o.events:
            if e.kind == "retract" and e.rid is not None:
                self.lines.append({"ev": "retract", "iter": self.it, "retracted": [self.name(e.rid)]})
        spec = batch.spec_info
        fields = {} if spec is None else {k: _shape(getattr(spec, k, None)) for k in ("topk_p", "topk_index", "hidden_states", "bonus_tokens")}
        lens_from = o.before if o.batch_kind == "prefill" else s
        rids = [self.name(r) for r in batch.rids]
        n = len(o.batch_rids)
        self.lines.append({
            "ev": "fbg", "iter": self.it, "mode_in": "EXTEND" if o.batch_kind == "prefill" else "DECODE",
            "rids": [self.name(r) for r in o.batch_rids], "bs": n, "path": path,
            "before": {"bs": n, "extend_lens": list(batch.extend_lens or ())} if o.batch_kind == "prefill" else {"bs": n},
            "events": [_fwd_event(f) for f in _model_fwds(o)],
            "after": {"seq_lens": list(batch.seq_lens),
                      "spec_info": {"cls": type(spec).__name__, "fields": {k: v for k, v in fields.items() if v}} if spec is not None else None},
            "reqs_after": {"rid": rids, "out_len": [lens_from.req(r).output_len for r in batch.rids],
                           "finished": [None if o.batch_kind == "prefill" or s.req(r).live else "FINISH_LENGTH"
                                        for r in batch.rids]},
            "result": {"accept_lens": list(accept[:n]) if path == "spec" else [1] * n if path == "fallback" else None}})
        self.state = s
        post = {"ev": "post", "iter": self.it, "rids": rids, "out_len": [s.req(r).output_len for r in batch.rids],
                "kv_committed": [s.req(r).kv_committed_len for r in batch.rids],
                "kv_allocated": [s.req(r).kv_allocated_len for r in batch.rids],
                "finished": [None if s.req(r).live else "FINISH_LENGTH" for r in batch.rids],
                "kv": self.kv(), "sched": self.sched()}
        self.lines.append(post)
        self.full_idle = _idles_next(RECORD_MODELS["post"].model_validate(post))  # the typed record conformance reads
        self.gap_open = True
        self.n += 1
        return True


def model_recording(config: SpecConfig, waves: list[list[Arrive]], *, variant: str = "fixed-threshold",
                    seed: int = 0, max_steps: int = 5000) -> list[dict[str, Any]]:
    """The lines of a recording of ``waves`` (each wave's requests arrive at once, after the last
    wave drained) on ``variant``, accept lengths drawn from ``seed``."""
    rng = random.Random(seed)
    w = _Writer(config, variant)
    for wave in waves:
        for a in wave:
            w.arrive(a)
        for _ in range(max_steps):
            accept = tuple(rng.randint(1, config.max_accept_len) for _ in range(64))
            if not w.step(accept):
                break
    return w.lines


def write(lines: list[dict[str, Any]], path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path
