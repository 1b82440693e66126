"""The differential fuzzer: Hypothesis draws workloads (``oracle/strategies.py``), each runs on the
oracle and on the model (``oracle_differential.py``); a mismatch shrinks to a minimal workload, which
is written as a trace with the commands that replay it on both and on the model alone. The first
mismatch is written as soon as it is seen and replaced by the shrunk one: an interrupted shrink
keeps it (its path is printed on the way out). Above the oracle's harness (``specstate/oracle/``),
beside the differential it drives."""

from __future__ import annotations

import collections
import sys
import time
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any

from specstate.integration.oracle_differential import FAMILY, Differential, OracleProcess, differential

__all__ = ["FuzzResult", "fuzz", "replay_commands"]


@dataclass
class FuzzResult:
    release: str
    examples: int = 0
    reached: collections.Counter = field(default_factory=collections.Counter)
    failure: Differential | None = None
    config: Any = None
    actions: list[Any] = field(default_factory=list)
    trace_path: str | None = None
    seconds: float = 0.0
    peak_rss_mb: float = 0.0  #: the oracle process's peak resident memory
    import_s: float = 0.0  #: the oracle process's imports (once)
    oracle_s: float = 0.0  #: the oracle's time on the workloads (a fresh Scheduler each)
    #: workloads on which the model broke one of its own invariants: (workload index, first violation's text)
    model_violations: list[tuple[int, str]] = field(default_factory=list)


def replay_commands(release: str, trace_path: str) -> list[str]:
    return [f"specstate oracle --engine {release} --trace {trace_path}",
            f"specstate reproduce {trace_path}"]


def fuzz(release: str, *, examples: int, derandomize: bool = True, shrink: bool = True,
         failure_dir: str | None = None, page_sizes: tuple[int, ...] = (1,), static: bool = False,
         process: OracleProcess | None = None) -> FuzzResult:
    """``examples`` workloads on ``release``'s oracle and its model family, stopping at the first
    mismatch (shrunk when ``shrink``), whose trace is saved in ``failure_dir``; configs at a
    page size drawn from ``page_sizes`` (``(1,)``: the unpaged stream, as before); ``static``:
    launches without ``--speculative-adaptive`` (``strategies.oracle_configs_v2_static``).
    ``process``: a running oracle process of ``release`` to use (and leave running: a test
    session's, whose imports are paid once); by default one of its own, closed at the end."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    from specstate.fuzz.stream import import_independent_draws
    from specstate.oracle.strategies import configs_for, oracle_workloads

    def oracle_configs() -> Any:  # noqa: ANN401  (the release's configs; ``one``'s source is part of
        return configs_for(release, page_sizes, static=static)  # Hypothesis's derandomized seed reads this source

    res = FuzzResult(release)
    t0 = time.perf_counter()
    phases = [Phase.generate, Phase.shrink] if shrink else [Phase.generate]
    with _oracle_for(release, process) as oracle:

        @settings(max_examples=examples, deadline=None, derandomize=derandomize, database=None, phases=phases,
                  suppress_health_check=list(HealthCheck), print_blob=False)
        @given(st.data())
        def one(data: Any) -> None:
            cfg = data.draw(oracle_configs(), label="config")
            actions = data.draw(oracle_workloads(cfg), label="actions")
            d = differential(release, cfg, actions, oracle=oracle)
            res.examples += 1
            res.reached.update(d.oracle.reached)
            res.peak_rss_mb = max(res.peak_rss_mb, float(d.oracle.figures.get("peak_rss_mb", 0.0)))
            res.import_s = float(d.oracle.figures.get("import_s", 0.0))
            res.oracle_s += float(d.oracle.figures.get("run_s", 0.0))
            if d.violations:
                res.model_violations.append((res.examples, d.violations[0].describe()))
            if not d.ok:
                res.failure, res.config, res.actions = d, cfg, actions
                if res.trace_path is None:  # written as soon as seen: an interrupted shrink keeps it
                    res.trace_path = str(_save(res, failure_dir))
                raise AssertionError(d.describe())

        try:
            with import_independent_draws():
                one()
        except AssertionError:
            pass
        except BaseException:  # SIGINT / SIGTERM: say where the mismatch found so far is
            if res.trace_path is not None:
                print(f"specstate oracle: the mismatch found before the interruption (not shrunk): {res.trace_path}",
                      file=sys.stderr, flush=True)
            raise
    res.seconds = round(time.perf_counter() - t0, 1)
    if res.failure is not None:  # the shrunk workload replaces the first one seen
        res.trace_path = str(_save(res, failure_dir, name=Path(res.trace_path or "").name or None))
    return res


def _oracle_for(release: str, process: OracleProcess | None) -> AbstractContextManager[OracleProcess]:
    """``process``, left running at the end, or a new oracle process of ``release``, closed at the end."""
    if process is None:
        return OracleProcess(release)
    if process.release != release:
        from specstate.errors import InvalidArgument

        raise InvalidArgument(f"process: expected an oracle process of sglang {release} but got one of sglang "
                              f"{process.release}")
    return nullcontext(process)


def _save(res: FuzzResult, folder: str | None, name: str | None = None) -> Any:
    from specstate.fuzz.trace import Trace, save_trace

    d = res.failure
    assert d is not None
    trace = Trace(config=res.config, variant=FAMILY[res.release], actions=list(res.actions),
                  notes={"source": "oracle", "release": res.release, "first_mismatch": d.describe()})
    return save_trace(trace, folder, name, overwrite=name is not None)
