"""The model's side of the worker oracle: the batches it feeds upstream, and what the model says of each.

A *worker batch* is one target forward of a model run at which ``ModelRunner._forward_raw`` asked a
graph runner (``ForwardRecord.graph_offer``: ``is_cuda_graph()`` and ``can_run``), written as plain
JSON data: the ``ForwardBatch`` the model built (mode, ``seq_lens``, the rows of ``input_ids``,
``positions``, ``out_cache_loc``, the speculative input's class and widths, the requested capture
mode) and the runner (captured sizes, tokens per request, its buffers' capacity). Beside it, the
model's *expectation*: the graph decision, the padded batch size where the graph ran, and the
exception where the model's step crashed inside that forward (``Crash``: class, message, shapes).
Forwards a variant runs eager on purpose (the corrected fallback's bypass) and prefills are not fed.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from specstate.model.modes import Worker
from specstate.model.replay import BACKEND
from specstate.model.records import Crash, ForwardRecord
from specstate.model.step import StepOutcome
from specstate.oracle.worker._upstream import SPEC_CLASSES
from specstate.oracle.worker.signature import error_signature

__all__ = ["REPLAY", "worker_batches", "batch_of", "expected_of", "model_batches"]

#: where the model's target replay raises (``replay.py``'s symbol)
REPLAY = "cuda_graph_runner.py::CudaGraphRunner.replay_prepare"


def _spec(fr: ForwardRecord, info: Any) -> dict[str, Any] | None:
    cls = fr.spec_info_type
    if cls is None:
        return None
    names = [c.__name__ for c in cls.__mro__]
    upstream = next((n for n in names if n in SPEC_CLASSES), None)
    out: dict[str, Any] = {"class": upstream, "model_class": cls.__name__, "num_tokens_per_req": fr.num_tokens_per_req}
    if upstream == "EagleVerifyInput" and info is not None:
        out.update(draft_token_num=info["draft_token_num"], custom_mask=info["custom_mask"],
                   spec_steps=info["spec_steps"], topk=info["topk"])
    return out


def batch_of(fr: ForwardRecord, verify: dict[str, Any] | None = None) -> dict[str, Any]:
    """The request for upstream: ``fr``'s ``ForwardBatch`` and its runner (``verify``: an
    ``EagleVerifyInput``'s widths, which the record does not carry)."""
    assert fr.graph_offer is not None
    runner = fr.graph_offer[0]
    capacity = next(s.capacity for s in runner.buffers if s.name == "input_ids")
    return {
        "mode": fr.forward_mode.value, "seq_lens": list(fr.seq_lens), "input_ids": list(fr.input_ids),
        "positions": None if fr.positions is None else list(fr.positions),
        "out_cache_loc": None if fr.out_cache_loc is None else list(fr.out_cache_loc),
        "spec": _spec(fr, verify), "capture": fr.capture_hidden_mode.name,
        "runner": {"name": runner.name, "capture_bs": list(runner.capture_bs), "num_tokens_per_bs": runner.num_tokens_per_bs,
                   "max_num_token": capacity, "capture_hidden_mode": runner.capture_hidden_mode.name,
                   "capture_forward_mode": runner.capture_forward_mode.value},
    }


def expected_of(fr: ForwardRecord, crash: Crash | None) -> dict[str, Any]:
    """What the model says of ``fr``: ``graph`` (its ``can_run``), ``error`` (the crash raised in
    this forward, as :func:`~specstate.oracle.worker.signature.error_signature`), ``shapes``
    (the crash's shapes), ``padded_bs`` (where the graph ran)."""
    assert fr.graph_offer is not None
    out: dict[str, Any] = {"graph": fr.graph_offer[1], "error": None, "padded_bs": None, "shapes": None}
    if fr.graph is not None:
        out["padded_bs"] = fr.graph.padded_bs
    if crash is not None:
        # a crash inside the graph replay is replay_prepare's (whichever function of the running release
        # raised: 0.5.12's grouped copy, 0.5.9's GraphInputBuffers.populate_from_forward_batch), except
        # the attention backend's replay metadata, which the oracle does not run (compare._backend_crash)
        stage = "replay_prepare" if crash.where == REPLAY or (fr.graph_offer[1] and crash.where != BACKEND) else crash.where
        out["error"] = error_signature(crash.error_class, crash.message, stage)
        out["shapes"] = dict(crash.shapes)
    return out


def worker_batches(outcome: StepOutcome) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``(batch, expected)`` for every target forward of ``outcome`` that asked a graph runner;
    a crash belongs to the forward it was raised in (the step's last, entered but unfinished)."""
    out = []
    forwards = outcome.forwards
    for i, fr in enumerate(forwards):
        if fr.worker != Worker.TARGET or fr.graph_offer is None:
            continue
        crashed = outcome.crash is not None and i == len(forwards) - 1 and fr.graph is None and fr.graph_offer[1]
        verify = _verify_widths(outcome, fr)
        out.append((batch_of(fr, verify), expected_of(fr, outcome.crash if crashed else None)))
    return out


def _verify_widths(outcome: StepOutcome, fr: ForwardRecord) -> dict[str, Any] | None:
    """An ``EagleVerifyInput``'s widths: the config's (``EAGLEWorker.draft`` builds it from them)."""
    if fr.spec_info != "EagleVerifyInput":
        return None
    cfg = outcome.before.config
    n = fr.graph_offer[0].num_tokens_per_bs if fr.graph_offer is not None else cfg.speculative_num_draft_tokens
    return {"draft_token_num": n, "custom_mask": [n * (sum(fr.seq_lens) + n * fr.batch_size)],
            "spec_steps": cfg.speculative_num_steps, "topk": cfg.speculative_eagle_topk}


def model_batches(config: Any, variant: Any, play: Callable[[Any], None] | Sequence[Any]
                  ) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], Any]:
    """Run ``variant`` on ``config`` (``play``: the actions, or a function given the ``Run``), every
    invariant checked, stopping at the first violation (a crash is one); the worker batches of every
    step, and the run's result."""
    from specstate.check import Run, StopRun

    found: list[tuple[dict[str, Any], dict[str, Any]]] = []
    run = Run(config, variant, on_step=lambda o: found.extend(worker_batches(o)))
    try:
        if callable(play):
            play(run)
        else:
            for action in play:
                run.apply(action)
    except StopRun:
        pass
    return found, run.result()


def hand_batch(config: Any, *, bs: int, input_ids: int, out_cache_loc: int | None, ops: Any = None
               ) -> tuple[dict[str, Any], dict[str, Any]]:
    """A decode batch built by hand, as the seed's patch would hand it to the target's graph path
    (``forward_target_extend``: capture FULL) with the stale ``EagleDraftInput`` still attached:
    ``bs`` requests, ``input_ids`` rows (issue 35: 2, what the running batch kept through
    ``merge_batch``), ``out_cache_loc`` rows (``None``: as ``merge_batch`` leaves it). The model's
    own ``run_forward`` / ``replay_prepare`` (``ops``'s, else ``DEFAULT_OPS``) judges it, and its
    operation ``new_draft_input`` builds the draft input; returns ``(batch, expected)``."""
    from specstate.model.modes import CaptureHiddenMode, ForwardMode
    from specstate.model.ops import DEFAULT_OPS
    from specstate.model.runner import ForwardBatch, ModelledCrash, default_graph_runners, run_forward

    table = DEFAULT_OPS if ops is None else ops
    rids = tuple(range(bs))
    fb = ForwardBatch(forward_mode=ForwardMode.DECODE, rids=rids, seq_lens=(60,) * bs, input_ids=(input_ids,),
                      positions=(bs,), out_cache_loc=None if out_cache_loc is None else (out_cache_loc,),
                      spec_info=table.new_draft_input(table, config, rids), capture_hidden_mode=CaptureHiddenMode.FULL)
    runner = default_graph_runners(config)["target_verify"]
    try:
        fr = run_forward("hand", Worker.TARGET, fb, runner, config, ops=ops)
        crash = None
    except ModelledCrash as e:
        assert e.attempted is not None
        fr, crash = e.attempted, Crash(type(e.cause).__name__, e.where, str(e.cause), dict(e.shapes))
    return batch_of(fr), expected_of(fr, crash)
