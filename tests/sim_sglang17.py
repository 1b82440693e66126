"""A model-driven stand-in for sglang 0.5.17's scheduler, for CPU tests of the recorder.

``simulate(config, variant, actions, out)`` runs the v2 model and, at every point where the
real overlap loop would call a hooked function, calls the recorder's hook
(``specstate.integration.sglang_0_5_17.recorder``) with duck-typed objects that carry the
attributes the hooks read on the real objects (``Req.kv.kv_allocated_len``,
``Scheduler.new_token_ratio_tracker.current``, ``GenerationBatchResult.accept_lens``, the adaptive
controller's ``params._slots`` and ``_states``, ...), in the real order: ``end`` of the last
logged iteration and the inputs (``process_input_requests``), the plan
(``get_next_batch_to_run``, with ``retract_decode`` and the re-queue of what it retracted inside
it), the launch and its forwards (``forward_batch_generation``,
``ModelRunner.forward``, the draft graph runners' ``execute``), the processed result
(``process_batch_result``). The recording it writes must conform with the same variant.
"""

from __future__ import annotations

import functools
import types
from typing import Any, Callable

from specstate._lazy import lazy_module

from specstate.integration.sglang_0_5_17 import recorder as hooks
from specstate.integration.sglang_0_5_17 import switch_patch
from specstate.integration.sglang_0_5_17.conformance import model_admitted, resumed_v2
from specstate.model import Abort, Arrive, SpecConfig, Step, get_variant, initial_state, step
from specstate.model.request import ReqStatus
from specstate.model.sglang_0_5_17.aborts import OOM_ABORT_MESSAGE
from specstate.model.sglang_0_5_17.runtime import runtime_states

torch = lazy_module("torch", globals())  # imported by the first test that uses it, not at collection

__all__ = ["simulate", "Sim", "FakeScheduler"]


class _Mode:
    def __init__(self, name: str) -> None:
        self.name, self.value = name, name

    def is_extend(self) -> bool:
        return self.name in ("EXTEND", "MIXED")

    def is_idle(self) -> bool:
        return self.name == "IDLE"

    def is_decode(self) -> bool:
        return self.name == "DECODE"


class _Finish:  # FINISH_LENGTH / FINISH_MATCHED_TOKEN / FINISH_ABORT by name
    pass


@functools.lru_cache(maxsize=None)
def _finish_class(name: str) -> type:
    """One class per name: making a class per finished request per iteration was most of the
    simulation's time (``type()`` is slow, and 190k calls for the adaptive sweep)."""
    return type(name, (_Finish,), {})


def _finish(name: str) -> Any:
    return _finish_class(name)()


class FakeReq:
    def __init__(self, rid: str, prompt: list[int], max_new: int) -> None:
        self.rid, self.origin_input_ids, self.output_ids = rid, prompt, []
        self.sampling_params = types.SimpleNamespace(max_new_tokens=max_new, ignore_eos=True)
        self.kv_committed_len, self.kv, self.finished_reason, self.is_retracted = 0, None, None, False
        self._synced: Any = None  #: the model's request last copied (frozen: the same object, the same values)

    def finished(self) -> bool:
        return self.finished_reason is not None

    def sync(self, r: Any) -> None:
        if r is self._synced:  # only ``sync`` writes these fields
            return
        self._synced = r
        self.output_ids = [0] * r.output_len
        self.kv_committed_len = r.kv_committed_len
        self.kv = types.SimpleNamespace(kv_allocated_len=r.kv_allocated_len) if r.kv_allocated_len else None
        self.is_retracted = r.is_retracted
        self.finished_reason = None
        if r.status in (ReqStatus.FINISHED, ReqStatus.ABORTED):
            name = {"length": "FINISH_LENGTH", "eos": "FINISH_MATCHED_TOKEN"}.get(r.finish_reason.value, "FINISH_ABORT")
            self.finished_reason = _finish(name)


class _Batch:
    def __init__(self, reqs: list[FakeReq], mode: str) -> None:
        self.reqs, self.forward_mode, self.batch_is_full, self.is_extend_in_batch = reqs, _Mode(mode), False, False


class _Slot:
    def __init__(self, s: Any) -> None:
        self.current_steps, self.ema_accept_len, self._batch_count = s.current_steps, s.ema_accept_len, s.batch_count


def _runner(r: Any) -> Any:
    return None if r is None else types.SimpleNamespace(capture_bs=list(r.capture_bs), captured_req_width=r.num_tokens_per_bs,
                                                        capture_forward_mode=_Mode(r.capture_forward_mode.value))


class FakeScheduler:
    """The attributes of ``Scheduler`` the recorder reads, synchronised from a model state."""

    def __init__(self, config: SpecConfig, adaptive_path: str | None) -> None:
        self.config, self.reqs = config, []
        self.names: list[str] = []  #: rids for the next arrivals (else made up)
        self.waiting_queue: list[FakeReq] = []
        self.running_batch = _Batch([], "DECODE")
        self.chunked_req = None
        self.new_token_ratio_tracker = types.SimpleNamespace(current=config.init_new_token_ratio)
        self.tree_cache = types.SimpleNamespace(evictable_size=lambda: 0, protected_size=lambda: 0)
        self.token_to_kv_pool_allocator = types.SimpleNamespace(available_size=lambda: config.kv_pool_size,
                                                                size=config.kv_pool_size)
        self.req_to_token_pool = types.SimpleNamespace(available_size=lambda: config.max_running_requests)
        self.max_running_requests, self.max_total_num_tokens = config.max_running_requests, config.kv_pool_size
        self.max_prefill_tokens, self.chunked_prefill_size = config.max_prefill_tokens, config.chunked_prefill_size
        self.model_config = types.SimpleNamespace(context_len=config.context_len)
        self.server_args = types.SimpleNamespace(
            speculative_algorithm="EAGLE3", speculative_eagle_topk=1, speculative_num_steps=config.speculative_num_steps,
            speculative_num_draft_tokens=config.speculative_num_draft_tokens, speculative_adaptive=config.speculative_adaptive,
            speculative_adaptive_config=adaptive_path, disable_overlap_schedule=False,
            cuda_graph_max_bs_decode=config.cuda_graph_max_bs, cuda_graph_bs_decode=config.cuda_graph_bs_override,
            schedule_conservativeness=config.schedule_conservativeness, disable_radix_cache=config.disable_radix_cache)
        states = runtime_states(config)
        controller = types.SimpleNamespace(params=types.SimpleNamespace(_slots={}), _states={
            k: types.SimpleNamespace(cuda_graph_runner=_runner(st.draft_decode), target_graph_runner=_runner(st.target_verify),
                                     cuda_graph_runner_for_draft_extend=_runner(st.draft_extend),
                                     speculative_num_draft_tokens=st.draft_tokens) for k, st in states.items()})
        # EAGLEWorkerV2: no controller on a static launch (``EAGLEWorkerV2.__init__``); its draft worker
        self.model_worker = types.SimpleNamespace(
            speculative_num_steps=config.speculative_num_steps, speculative_num_draft_tokens=config.speculative_num_draft_tokens,
            server_args=self.server_args, adaptive_controller=controller if config.speculative_adaptive else None,
            _draft_worker=types.SimpleNamespace(speculative_num_steps=config.speculative_num_steps,
                                                speculative_num_draft_tokens=config.speculative_num_draft_tokens))

    def req(self, rid: int) -> FakeReq:
        return self.reqs[rid]

    def sync(self, s: Any) -> None:
        for r in s.reqs:
            self.reqs[r.rid].sync(r)
        self.waiting_queue = [self.reqs[r] for r in s.waiting]
        self.running_batch = _Batch([self.reqs[r] for r in s.running.rids], "DECODE")
        self.running_batch.batch_is_full = s.running.batch_is_full
        self.chunked_req = self.reqs[s.chunked_rid] if s.chunked_rid is not None else None
        self.new_token_ratio_tracker.current = s.new_token_ratio
        ev, pr, av = s.tree.evictable, s.tree.protected, s.kv_available
        self.tree_cache.evictable_size, self.tree_cache.protected_size = (lambda: ev), (lambda: pr)
        self.token_to_kv_pool_allocator.available_size = lambda: av
        if s.v2 is not None:
            self.model_worker.speculative_num_steps = s.v2.active_steps
            if s.v2.adaptive is not None:
                self.model_worker.adaptive_controller.params._slots = {k: _Slot(v) for k, v in s.v2.adaptive.slots}


def _fwd_batch(f: Any) -> Any:
    spec = type(f.spec_info, (), {"num_tokens_per_req": f.num_tokens_per_req})() if f.spec_info else None
    return types.SimpleNamespace(forward_mode=_Mode(f.forward_mode.value), batch_size=f.batch_size,
                                 input_ids=torch.zeros(f.input_ids, dtype=torch.int64),
                                 out_cache_loc=torch.zeros(f.out_cache_loc or (0,), dtype=torch.int64),
                                 seq_lens_cpu=torch.tensor(list(f.seq_lens), dtype=torch.int64), spec_info=spec)


def _launch(sched: FakeScheduler, o: Any) -> Callable[..., Any]:
    """The original ``forward_batch_generation``: its forwards through the forward hooks."""
    def original(worker: Any, batch: Any, *a: Any, **k: Any) -> Any:
        if batch.forward_mode.is_decode() and switch_patch.config_from_env() is not None:
            _patched_counts(worker, batch, o)
        for f in o.forwards:
            fb = _fwd_batch(f)
            if f.graph is not None and f.worker.value == "draft":
                runner = types.SimpleNamespace(capture_bs=list(sched.config.cuda_graph_bs))
                hooks.around_draft_graph(lambda r, b: None, runner, fb)
            else:
                mr = types.SimpleNamespace(is_draft_worker=f.worker.value == "draft", decode_cuda_graph_runner=
                                           types.SimpleNamespace(capture_bs=list(sched.config.cuda_graph_bs)))
                hooks.around_model_runner_forward(lambda r, b: types.SimpleNamespace(can_run_graph=f.graph is not None), mr, fb)
        if o.crash is not None:  # the worker raises what the model predicts (the recorder's ``fbg_error``)
            raise _CRASHES.get(o.crash.error_class, RuntimeError)(o.crash.message)
        if o.state.v2 is not None and o.state.v2.pending is not None:
            worker.speculative_num_steps = o.state.v2.pending.steps
        return None
    return original


_CRASHES: dict[str, type[Exception]] = {"RuntimeError": RuntimeError, "IndexError": IndexError, "ValueError": ValueError,
                                        "AttributeError": AttributeError, "AssertionError": AssertionError}


def _patched_counts(worker: Any, batch: Any, o: Any) -> None:
    """``EAGLEWorkerV2.forward_batch_generation``'s first call on a decode: the real switch patch's
    hook (``switch_patch.around_activate_step_by_batch``) on the fake worker, whose counts must be
    the ones the model's variant launched with (steps; the draft worker's draft-token width)."""
    switch_patch.around_activate_step_by_batch(lambda w, bs: None, worker, len(batch.reqs))
    launched = o.state.v2.pending if o.crash is None and o.state.v2 is not None else None
    got = (worker.speculative_num_steps, worker._draft_worker.speculative_num_draft_tokens)
    if launched is not None and launched.kind == "decode" and got != (launched.steps, launched.draft_tokens):
        raise AssertionError(f"the switch patch set (steps, draft tokens) {got}, the model launched "
                             f"({launched.steps}, {launched.draft_tokens})")


def _inputs(sched: FakeScheduler, state: Any, inputs: list[Any], ops: Any, seed: int) -> Callable[..., Any]:
    """The original ``process_input_requests``: arrivals and aborts, one by one."""
    box = {"state": state}

    def original(scheduler: Any, *a: Any, **k: Any) -> None:
        for x in inputs:
            box["state"] = step(box["state"], x, ops).state
            if isinstance(x, Arrive):
                req = _new_req(sched, box["state"], x, seed)
                sched.sync(box["state"])
                hooks.around_add_request_to_queue(lambda s, r, *aa, **kk: None, sched, req)
            else:
                sched.sync(box["state"])
                hooks.after_abort_request(None, sched, types.SimpleNamespace(rid=sched.reqs[x.rid].rid, abort_all=False))
    original.box = box  # type: ignore[attr-defined]
    return original


def _new_req(sched: FakeScheduler, s: Any, a: Arrive, seed: int) -> FakeReq:
    rid = len(sched.reqs)
    r = s.req(rid)
    prompt = [((rid + 1) * 7919 + i * 31 + seed) % 30000 + 3 for i in range(a.prompt_len)]
    if a.prefix_of is not None:
        prompt[: a.shared_len] = sched.reqs[a.prefix_of].origin_input_ids[: a.shared_len]
    name = sched.names.pop(0) if sched.names else f"q{seed}r{rid:04d}"
    req = FakeReq(name, prompt, r.max_new_tokens)
    sched.reqs.append(req)
    return req


class Sim:
    """A running stand-in scheduler: ``feed`` actions (arrivals, aborts, loop iterations), as the
    real one receives requests and loops; the recorder writes to ``hooks.REC.out_path``."""

    def __init__(self, config: SpecConfig, variant: str, *, adaptive_path: str | None = None, seed: int = 0,
                 resume: Any = None) -> None:
        """``resume``: the ``OverlapState`` an earlier Sim ended in (its adaptive controller and
        active runtime state carry over, as in one real engine across workloads)."""
        v = get_variant(variant)
        self.cfg, self.ops, self.seed = v.configure(config), v.ops(), seed
        self.sched, self.state, self.pending = FakeScheduler(self.cfg, adaptive_path), initial_state(self.cfg), []
        if resume is not None and self.state.v2 is not None:
            slots = {str(k): (sl.current_steps, sl.ema_accept_len, sl.batch_count)
                     for k, sl in (resume.adaptive.slots if resume.adaptive is not None else ())}
            self.state = self.state.evolve(v2=resumed_v2(self.state.v2, resume.active_steps, slots))
        self.sched.sync(self.state)

    def feed(self, actions: list[Any]) -> None:
        for a in actions:
            if isinstance(a, (Arrive, Abort)):
                self.pending.append(a)
                continue
            self.state = _iteration(self.sched, self.state, a, self.pending, self.ops, self.seed)
            self.pending = []

    def quiet(self) -> bool:
        s = self.state
        return not self.pending and s.is_idle() and s.last_batch is None and (s.v2 is None or s.v2.pending is None)

    def close(self) -> None:
        """The next iteration's top: the last logged iteration's ``end`` line."""
        hooks.around_process_input_requests(lambda s, *aa: None, self.sched, [])


def simulate(config: SpecConfig, variant: str, actions: list[Any], out: str, *, tag: str = "sim",
             adaptive_path: str | None = None, seed: int = 0, resume: Any = None) -> Any:
    """Run ``actions`` on ``variant`` and write what the 0.5.17 recorder would record to ``out``
    (``resume``: an earlier run's final state, whose controller carries over); the final state."""
    cfg = get_variant(variant).configure(config)
    if adaptive_path is None and cfg.speculative_adaptive_config is not None:
        adaptive_path = out + ".adaptive.json"
        with open(adaptive_path, "w") as f:
            f.write(cfg.speculative_adaptive_config)
    hooks.REC.__init__()
    hooks.REC.out_path, hooks.REC.tag = out, tag
    hooks._PROMPTS.clear()
    sim = Sim(config, variant, adaptive_path=adaptive_path, seed=seed, resume=None if resume is None else resume.v2)
    sim.feed(actions)
    sim.close()
    hooks.REC._close()
    return sim.state


def _retract(sched: FakeScheduler, o: Any) -> None:
    """``Scheduler.update_running_batch`` when the step retracted: ``ScheduleBatch.retract_decode``
    (who was retracted, who aborted out of memory, the new ratio), then
    ``_add_request_to_queue(req, is_retracted=True)`` for each retracted request."""
    retracted = [sched.reqs[e.rid] for e in o.events if e.kind == "retract" and e.rid is not None]
    aborted = [sched.reqs[e.rid] for e in o.events if e.kind == "abort" and e.rid is not None
               and e.detail.startswith(OOM_ABORT_MESSAGE)]
    if not retracted and not aborted:
        return
    after = _Batch([sched.reqs[r] for r in o.state.running.rids], "DECODE")
    hooks.around_retract_decode(lambda b, *aa, **kk: (retracted, o.state.new_token_ratio, aborted), after)
    for req in retracted:
        hooks.around_add_request_to_queue(lambda s, r, *aa, **kk: None, sched, req, is_retracted=True)


def _admitted(batch: _Batch, o: Any) -> None:
    """``Req.prefix_indices`` and ``ScheduleBatch.extend_lens`` of a launched prefill, as the
    model has them (``conformance.model_admitted``)."""
    lens = model_admitted(o)
    batch.extend_lens = list(lens["extend_lens"])
    for req, prefix in zip(batch.reqs, lens["prefix_lens"]):
        req.prefix_indices = [0] * prefix


def _iteration(sched: FakeScheduler, state: Any, a: Step, inputs: list[Any], ops: Any, seed: int) -> Any:
    inp = _inputs(sched, state, inputs, ops, seed)
    hooks.around_process_input_requests(inp, sched, [])
    state = inp.box["state"]  # type: ignore[attr-defined]
    o = step(state, a, ops)
    last = [sched.reqs[r] for r in o.processed] if o.processed else None
    before = state.v2.pending if state.v2 is not None else None
    batch = _Batch([sched.reqs[r] for r in o.batch_rids], "EXTEND" if o.batch_kind == "prefill" else "DECODE") \
        if o.batch_kind in ("prefill", "decode") else None
    if batch is not None and o.batch_kind == "prefill":
        _admitted(batch, o)
    plan = types.SimpleNamespace(batch_to_run=batch)
    last_batch = _Batch(last, "EXTEND" if before is not None and before.kind == "prefill" else "DECODE") if last else None

    def get_next_batch_to_run(s: Any, **k: Any) -> Any:
        _retract(sched, o)  # update_running_batch -> retract_decode, then the re-queue: inside the plan
        return plan
    hooks.around_get_next_batch_to_run(get_next_batch_to_run, sched, running_batch=sched.running_batch,
                                       last_batch=last_batch)
    if batch is not None:
        hooks.around_fbg(_launch(sched, o), sched.model_worker, batch)
    sched.sync(o.state)
    if last_batch is not None and before is not None:
        acc = torch.tensor(list(before.accept)) if before.kind == "decode" else None
        res = types.SimpleNamespace(accept_lens=acc, speculative_num_draft_tokens=before.draft_tokens)
        hooks.after_process_batch_result(None, sched, last_batch, res)
    return o.state
