"""Differential runs: one workload into the oracle (upstream's scheduler, in its own process)
and into the model, compared step by step by the conformance comparison the GPU recordings use
(``specstate.integration.compare.compare``), first mismatch first. It sits here, above both what it
compares: the oracle's harness (``specstate/oracle/``: the process, the wheel, the catalog), which
imports nothing of ``integration/``, and the release adapters (the model's side), so that a release's
oracle module lives in its release folder (``integration/sglang_X_Y_Z/oracle.py``) over that harness.

The oracle has no forward and no speculative tensors of its own (its worker is fake: see the
release adapter), so the forward half of an ``Observation`` is not its to report: ``forwards``,
``spec_after`` and ``spec_rows_after`` are left out on both sides (``_scheduler_half``); every
other field is compared as for a recording: the batch (kind, rows, path, extend lengths,
``seq_lens`` and output lengths after the forward) and the scheduler after
``process_batch_result`` (allocator, radix tree, per-request KV, waiting queue, chunked
request, ``new_token_ratio``, ``batch_is_full``), and the retractions before it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from specstate.integration.backend import Observation
from specstate.integration.compare import Mismatch, compare
from specstate.model import SpecConfig, action_to_json
from specstate.oracle.catalog import VARIANTS
from specstate.oracle._process import end_child

__all__ = ["FAMILY", "OracleRun", "OracleProcess", "Differential", "oracle_config", "run_oracle", "run_model", "judge",
           "differential"]


#: the model variant each release is compared with (``catalog.py``)
FAMILY = VARIANTS

_TUPLES = ("rids", "accept_lens", "seq_lens_after", "out_lens_after", "extend_lens", "kv_after", "retracted",
           "waiting_after", "processed", "running_after", "aborted")


@dataclass
class OracleRun:
    observations: list[Observation]
    error: str | None
    figures: dict[str, Any] = field(default_factory=dict)  #: import_s, run_s, peak_rss_mb
    reached: tuple[str, ...] = ()  #: what upstream's scheduler went through (``Driver.reached``)
    #: ``file::function`` of upstream's own invariant check that raised ``error`` (``_core.upstream_check_of``)
    upstream_check: str | None = None
    #: upstream's invariant checks the oracle's process ran with (``_core.STRICT_CHECKS``)
    strict_checks: tuple[str, ...] = ()


@dataclass
class Differential:
    release: str
    oracle: OracleRun
    model: list[Observation]
    mismatches: list[Mismatch]
    #: the model's own invariant violations on the workload (``Violation``; what ``judge`` returns too)
    violations: list[Any] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No mismatch with the oracle (the model's own violations: ``violations``), and upstream
        ran through, or raised what the model predicts (``predicted``)."""
        return not self.mismatches and (self.oracle.error is None or self.predicted)

    @property
    def predicted(self) -> bool:
        """Upstream raised, and the model crashed on the workload with upstream's exception (class
        and message: its ``worker-crash``), the observations before it agreeing: the model predicted
        upstream's crash (e.g. 0.5.9's ``retract_decode`` ``ValueError``)."""
        err = self.oracle.error
        return err is not None and any(v.invariant == "worker-crash" and v.actual == err for v in self.violations)

    def describe(self) -> str:
        if self.predicted and not self.mismatches:
            return f"sglang {self.release} raised, as the model predicts: {self.oracle.error}"
        if self.oracle.error and self.oracle.upstream_check:
            return (f"sglang {self.release}'s own invariant check failed on this workload "
                    f"({self.oracle.upstream_check}): {self.oracle.error}")
        if self.oracle.error:
            return f"sglang {self.release} oracle raised: {self.oracle.error}"
        if not self.mismatches:
            return f"sglang {self.release}: {len(self.model)} iterations, 0 mismatches"
        return f"sglang {self.release}: {len(self.mismatches)} mismatches, first: {self.mismatches[0].describe()}"


def oracle_config(config: SpecConfig) -> dict[str, Any]:
    """The server arguments of a model config that the oracle's ``ServerArgs`` take."""
    keys = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens", "target_kv_pool_size",
            "chunked_prefill_size", "max_prefill_tokens", "max_running_requests", "schedule_conservativeness",
            "disable_radix_cache", "context_len", "speculative_adaptive_config", "speculative_adaptive")
    out = {k: getattr(config, k) for k in keys}
    if config.page_size != 1:  # --page-size (absent: 1, the request as before paging)
        out["page_size"] = config.page_size
    return out


class OracleProcess:
    """One oracle process of one release (``oracle/child.py``), kept for many workloads: the
    imports are paid once, each workload gets a fresh upstream ``Scheduler``."""

    def __init__(self, release: str) -> None:
        from specstate.oracle.wheels import unpacked

        self.release = release
        unpacked(release)  # the pinned tree, checked here: a bad cache is one line before anything runs
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([_root(), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
        import tempfile

        # stderr to a file, never a pipe: upstream logs on every Scheduler start (0.5.17 more than a
        # pipe's buffer over a few workloads) and a full pipe nobody reads blocks the oracle for good
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, "-m", "specstate.oracle.child", release], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err, text=True, env=env)

    def run(self, config: SpecConfig, actions: Sequence[Any]) -> OracleRun:
        self.send(config, actions)
        return self.receive()

    def send(self, config: SpecConfig, actions: Sequence[Any]) -> None:
        """Start a workload (``receive`` reads its answer: the caller may work meanwhile)."""
        request = {"config": oracle_config(config), "actions": [action_to_json(a) for a in actions]}
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass

    def receive(self) -> OracleRun:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            from specstate.oracle._core import raise_if_signalled

            raise_if_signalled(self.proc.wait())
            self.err.seek(0)
            err = self.err.read()
            return OracleRun([], f"the oracle's process exited {self.proc.wait()}: {err.strip()[-1500:]}")
        out = json.loads(line)
        if out.get("unavailable"):
            from specstate.oracle.wheels import OracleUnavailable

            raise OracleUnavailable(out["unavailable"])
        figures = {k: out[k] for k in ("import_s", "run_s", "peak_rss_mb") if k in out}
        return OracleRun([_observation(o) for o in out["observations"]], out.get("error"), figures,
                         tuple(out.get("reached", ())), out.get("upstream_check"), tuple(out.get("strict_checks", ())))

    def close(self) -> None:
        end_child(self.proc, self.err, 30)

    def __enter__(self) -> "OracleProcess":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def run_oracle(release: str, config: SpecConfig, actions: Sequence[Any]) -> OracleRun:
    """One workload on sglang ``release``'s scheduler, in a process of its own."""
    with OracleProcess(release) as oracle:
        return oracle.run(config, actions)


def _root() -> str:
    from pathlib import Path

    return str(Path(__file__).resolve().parents[2])


def _observation(d: dict[str, Any]) -> Observation:
    vals: dict[str, Any] = {k: (tuple(v) if k in _TUPLES and v is not None else v) for k, v in d.items()}
    if vals.get("req_kv_after") is not None:
        vals["req_kv_after"] = tuple(tuple(x) for x in vals["req_kv_after"])
    if vals.get("adaptive_after") is not None:  # (active steps, ((slot, current, ema, count), ...))
        steps, slots = vals["adaptive_after"]
        vals["adaptive_after"] = (steps, tuple(tuple(x) for x in slots))
    return Observation(**vals)


def _observe_model(config: SpecConfig, actions: Sequence[Any], variant: Any) -> tuple[list[Observation], list[Any]]:
    """The same actions on the model through the conformance backend its recordings use (the
    release adapter that models the variant's family: ``integration.catalog.adapter_modelling``;
    a v2 one takes every ``Step`` as one logged ``event_loop_overlap`` iteration); every invariant
    checked after every step. The model's observations and its invariant violations."""
    from specstate.integration.catalog import adapter_modelling

    return adapter_modelling(variant).observe(config, list(actions), variant)


def run_model(config: SpecConfig, actions: Sequence[Any], variant: str) -> list[Observation]:
    """The same actions on the model, through conformance's ``ModelBackend`` (every invariant
    checked after every step)."""
    return _observe_model(config, actions, variant)[0]


def _scheduler_half(o: Observation) -> Observation:
    return replace(o, forwards=(), spec_after=(), spec_rows_after=None, crash=None)


def judge(run: OracleRun, config: SpecConfig, actions: Sequence[Any], variant: Any) -> tuple[list[Mismatch], list[Any]]:
    """One oracle run against a model variant (a ``Variant`` or its name): the mismatches and the
    model's invariant violations (the oracle's run does not depend on the variant: run it once,
    judge many variants, as the mutation study does)."""
    observed, violations = _observe_model(config, actions, variant)
    model = [_scheduler_half(o) for o in observed]
    return compare(model, [_scheduler_half(o) for o in run.observations]), violations


def differential(release: str, config: SpecConfig, actions: Sequence[Any], *, variant: str | None = None,
                 oracle: OracleProcess | None = None) -> Differential:
    """Oracle and model on one workload; the mismatches in conformance's terms (``oracle``: a
    running oracle process of ``release`` to use)."""
    variant = variant or FAMILY[release]
    if oracle is None:
        with OracleProcess(release) as own:
            return differential(release, config, actions, variant=variant, oracle=own)
    oracle.send(config, actions)  # the model runs while the oracle's process works
    observed, violations = _observe_model(config, actions, variant)
    model = [_scheduler_half(o) for o in observed]
    run = oracle.receive()
    real = [_scheduler_half(o) for o in run.observations]
    return Differential(release, run, model, compare(model, real), list(violations))
