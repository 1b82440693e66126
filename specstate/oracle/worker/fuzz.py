"""The worker oracle's fuzzer: Hypothesis draws a variant of the release's family, one of its
configs and a decode-heavy workload (:func:`decode_workloads`, over the model fuzzer's strategies), the model runs it,
and every target forward that asked a graph runner is fed to upstream's worker-side functions
(``differential.py``). Seeded and derandomized by default (one stream, one result); a mismatch
shrinks to a minimal workload. The figure that counts is the number of batches compared."""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Any

from specstate.oracle.worker.compare import WorkerProcess
from specstate.oracle.worker.differential import WorkerDifferential, variants_for, worker_differential

__all__ = ["WorkerFuzzResult", "fuzz_worker", "decode_workloads", "replay_commands", "save_failure"]


def decode_workloads(config: Any) -> Any:
    """Workloads that reach decodes: 1-4 segments, each a burst of 1 (2 in the first) to
    ``max_running_requests + 2`` arrivals (prompts of 1-16 tokens, 4-24 new tokens), maybe an
    abort, then 3-16 steps with drawn accept lengths and, one step in eight, EOS. The model fuzzer's ``workloads`` draws a step a
    quarter of the time and reached few decode batches per workload; the worker oracle judges only
    decode-side forwards (verify, the fallbacks)."""
    from hypothesis import strategies as st

    from specstate.fuzz.strategies import accept_lengths, eos_sets
    from specstate.model import Abort, Arrive, Step

    @st.composite
    def build(draw: Any) -> list[Any]:
        out: list[Any] = []
        arrived = 0
        for segment in range(draw(st.integers(1, 4))):
            most = config.max_running_requests + 2
            for _ in range(draw(st.integers(2 if segment == 0 else 1, most))):
                out.append(Arrive(draw(st.integers(1, 16)), draw(st.integers(4, 24))))
                arrived += 1
            if draw(st.integers(0, 5)) == 0:
                out.append(Abort(draw(st.integers(0, arrived - 1))))
            for _ in range(draw(st.integers(3, 16))):
                out.append(Step(accept=draw(accept_lengths(max_accept=config.max_accept_len,
                                                           max_rows=config.max_running_requests)),
                                eos=draw(eos_sets(range(arrived))) if draw(st.integers(0, 7)) == 0 else ()))
        return out

    return build()


@dataclass
class WorkerFuzzResult:
    release: str
    examples: int = 0  #: workloads
    batches: int = 0  #: worker batches compared
    per_variant: collections.Counter = field(default_factory=collections.Counter)
    reached: collections.Counter = field(default_factory=collections.Counter)
    failure: WorkerDifferential | None = None
    config: Any = None
    actions: list[Any] = field(default_factory=list)
    seconds: float = 0.0
    figures: dict[str, float] = field(default_factory=dict)  #: the oracle process's (imports, run, RSS)
    trace_path: str | None = None  #: the shrunk workload of a mismatch, saved as a trace


def replay_commands(release: str, trace_path: str) -> list[str]:
    """The commands that replay a saved mismatch: on both, and on the model alone."""
    return [f"specstate worker-oracle --engine {release} --trace {trace_path}", f"specstate reproduce {trace_path}"]


def save_failure(res: WorkerFuzzResult, folder: str | None = None) -> str:
    """Write the failing workload as a trace (the variant, config and actions; the mismatch in its notes)."""
    from specstate.fuzz.trace import Trace, save_trace

    d = res.failure
    assert d is not None and d.mismatch is not None
    trace = Trace(config=res.config, variant=d.variant, actions=list(res.actions),
                  notes={"source": "worker-oracle", "release": res.release, "first_mismatch": d.mismatch.describe()})
    return str(save_trace(trace, folder))


def fuzz_worker(release: str, *, examples: int, derandomize: bool = True, shrink: bool = True,
                variants: tuple[Any, ...] | None = None, process: WorkerProcess | None = None) -> WorkerFuzzResult:
    """``examples`` workloads, each under a drawn variant of ``release``'s family (``variants``:
    only these), stopping at the first mismatch (``process``: an open one of ``release``, kept open)."""
    if process is not None:
        return _fuzz(release, process, examples, derandomize, shrink, variants)
    with WorkerProcess(release) as own:
        return _fuzz(release, own, examples, derandomize, shrink, variants)


def _fuzz(release: str, process: WorkerProcess, examples: int, derandomize: bool, shrink: bool,
          variants: tuple[Any, ...] | None) -> WorkerFuzzResult:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    from specstate.fuzz.stream import import_independent_draws
    from specstate.fuzz.strategies import configs_for

    names = variants if variants is not None else variants_for(release)
    res = WorkerFuzzResult(release)
    t0 = time.perf_counter()
    phases = [Phase.generate, Phase.shrink] if shrink else [Phase.generate]

    @settings(max_examples=examples, deadline=None, derandomize=derandomize, database=None, phases=phases,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(st.data())
    def one(data: Any) -> None:
        variant = data.draw(st.sampled_from(names), label="variant")
        # an unregistered ``Variant`` (a test's mutation): its family's configs
        source = variant if isinstance(variant, str) else variant.engine_family.default_variant
        cfg = data.draw(configs_for(source), label="config")
        if cfg.max_running_requests > 1 and data.draw(st.booleans(), label="low threshold"):
            # a decode batch above the threshold (a variant without one drops it in ``configure``)
            cfg = cfg.with_(disable_batch_threshold=data.draw(st.integers(1, cfg.max_running_requests - 1)))
        actions = data.draw(decode_workloads(cfg), label="actions")
        d = worker_differential(process, cfg, variant, actions)
        res.examples += 1
        res.batches += len(d.batches)
        res.per_variant[d.variant] += len(d.batches)
        res.reached.update(d.reached)
        if not d.ok:
            res.failure, res.config, res.actions = d, cfg, actions
            raise AssertionError(d.mismatch.describe() if d.mismatch else "")

    try:
        with import_independent_draws():
            one()
    except AssertionError:
        pass
    res.figures = dict(process.figures)
    res.seconds = round(time.perf_counter() - t0, 1)
    return res
