"""The N-rank oracle: upstream sglang 0.5.12's scheduler on N gloo processes with DP attention,
compared with the multi-rank model (``specstate.multirank``) iteration by iteration, rank by rank.

``RankOracle(n)`` starts N processes (``multirank_child.py``), each one DP rank; ``run(config,
actions)`` sends every rank the workload and returns each rank's iterations. ``compare`` sets them
beside the model's ``always-spec`` run (upstream has no switch): per ``Step`` and rank, the MLP
syncs the rank gathered (every rank's ``num_tokens``, ``is_extend_in_batch``) and the batch it ran
(``prefill`` / ``decode`` / ``idle`` / none, and its rows). The model is given the config after
``ServerArgs._handle_data_parallelism`` (upstream's ``ServerArgs`` applies it itself to the config
sent). Workloads: ``specstate.multirank``'s own generator, arrivals without shared prefixes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Sequence

from specstate.model import Action, SpecConfig, action_to_json
from specstate.oracle._tmp import socket_base

__all__ = ["RankOracle", "Mismatch", "compare", "model_view", "routes_of"]


class RankOracle:
    """N processes, one per DP rank, kept for many workloads (a fresh ``Scheduler`` each)."""

    def __init__(self, n: int) -> None:
        from specstate.oracle.catalog import core_release
        from specstate.oracle.wheels import unpacked

        self.n = n
        unpacked(core_release())  # the pinned tree, checked here: a bad cache is one line before anything runs
        # one folder of the parent's own (mode 0700), removed by ``close``: the ranks' shared gloo
        # store, and each rank's $TMPDIR (its private folder is made inside)
        self.folder = tempfile.mkdtemp(prefix="specstate-oracle-dp-", dir=socket_base())
        self.init = os.path.join(self.folder, "gloo-store")
        self.procs: list[subprocess.Popen[str]] = []
        try:
            for r in range(n):
                self.procs.append(self._start(r))
        except BaseException:
            self.close(kill=True)
            raise

    def _start(self, rank: int) -> "subprocess.Popen[str]":
        tmp = os.path.join(self.folder, f"rank-{rank}")
        os.mkdir(tmp, 0o700)
        env = dict(os.environ, PYTHONUNBUFFERED="1", TMPDIR=tmp)
        return subprocess.Popen([sys.executable, "-m", "specstate.oracle.multirank_child", str(rank), str(self.n),
                                 self.init], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                text=True, env=env)

    def run(self, config: SpecConfig, actions: Sequence[Any], routes: Sequence[int] | None = None
            ) -> list[dict[str, Any]]:
        """Every rank's iterations for ``actions`` (a ``RoutedArrive`` is sent as its arrival);
        ``routes``: the rank of each arrival, in order (``None``: round robin, as upstream's
        ``DataParallelController.round_robin_scheduler``)."""
        from specstate.multirank._routing import RoutedArrive

        plain = [a.arrive if isinstance(a, RoutedArrive) else a for a in actions]
        request: dict[str, Any] = {"config": config.to_json() | _full(config), "actions": [action_to_json(a) for a in plain]}
        if routes is not None:
            request["routes"] = list(routes)
        line = json.dumps(request)
        for p in self.procs:
            assert p.stdin is not None
            p.stdin.write(line + "\n")
            p.stdin.flush()
        out: list[dict[str, Any]] = []
        for p in self.procs:
            assert p.stdout is not None
            text = p.stdout.readline()
            if not text:
                from specstate.oracle._core import raise_if_signalled

                raise_if_signalled(p.wait())
                raise RuntimeError(f"oracle rank {len(out)} exited with {p.returncode}")
            out.append(json.loads(text))
        return out

    def close(self, *, kill: bool = False) -> None:
        """End the ranks: their input closed, or (``kill``: an interrupted run) killed at once, since
        a rank whose peer died waits inside gloo's all-gather, where no signal handler runs."""
        for p in self.procs:
            if kill:
                p.kill()
            if p.stdin is not None and not p.stdin.closed:
                try:
                    p.stdin.close()
                except BrokenPipeError:  # the rank had already ended (a signal)
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            if p.stdout is not None:
                p.stdout.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> "RankOracle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close(kill=exc[0] is not None)


def _full(config: SpecConfig) -> dict[str, Any]:
    return {f: getattr(config, f) for f in ("disable_overlap_schedule",)}


@dataclass(frozen=True)
class Mismatch:
    step: int  #: 1-based index of the action (a ``Step``)
    rank: int
    field: str
    model: Any
    oracle: Any

    def describe(self) -> str:
        return f"step {self.step} rank {self.rank}: {self.field}: model {self.model}, upstream {self.oracle}"


def model_view(result: Any) -> list[tuple[int, list[dict[str, Any]]]]:
    """Per ``Step`` of a model run: (step, per rank {syncs, batch, rows}) in the oracle's form."""
    out = []
    for o in result.outcomes:
        it = o.iteration
        if it is None:
            continue
        syncs = [[list(s.global_num_tokens), s.is_extend_in_batch] for s in it.syncs]
        ranks = [{"syncs": syncs, "batch": p.batch, "rows": p.rows} for p in it.paths]
        out.append((it.step, ranks))
    return out


def compare(result: Any, answers: list[dict[str, Any]]) -> Mismatch | None:
    """The first difference between the model's run and every rank's answer."""
    for a in answers:
        if "error" in a:
            return Mismatch(0, a["rank"], "upstream raised", None, a["error"])
    view = model_view(result)
    for k, (step, ranks) in enumerate(view):
        for r, mine in enumerate(ranks):
            theirs = answers[r]["iterations"][k] if k < len(answers[r]["iterations"]) else None
            if theirs is None:
                return Mismatch(step, r, "iteration", mine, None)
            for field in ("syncs", "batch", "rows"):
                if mine[field] != theirs[field]:
                    return Mismatch(step, r, field, mine[field], theirs[field])
    return None


def oracle_config(config: SpecConfig, n: int) -> SpecConfig:
    """What the oracle's ranks are sent: the launch's config, except ``max_running_requests``
    already divided by ``n`` (upstream's ``ModelRunnerKVCacheMixin._resolve_max_num_reqs`` divides
    it; the fake model runner stands in for it and does not). Upstream's ``ServerArgs`` applies
    ``_handle_data_parallelism`` itself."""
    return config.with_(max_running_requests=max(1, config.max_running_requests // n))


def routes_of(result: Any) -> list[int] | None:  # noqa: ANN401 - a MultiResult
    """The rank each arrival of a model run reached (the model's routing), or ``None`` for a
    run of round-robin arrivals only (the oracle's ranks then route by themselves)."""
    from specstate.multirank._routing import RoutedArrive

    if not result.outcomes:
        return None
    if result.ranks.load_balance_method == "round_robin" and not any(isinstance(a, RoutedArrive) for a in result.actions):
        return None
    return [rank for rank, _ in result.outcomes[-1].state.owner]


def fuzz_ranks(oracle: RankOracle, config: SpecConfig, *, cases: int, seed: int = 0, length: int = 16,
               policy: Any = "always-spec", routed: float = 0.0, method: str = "round_robin"
               ) -> tuple[int, Mismatch | None, list[Action]]:
    """``cases`` random workloads (``specstate.multirank``'s generator) through the model and the
    oracle; the number run, the first mismatch and its workload. ``routed``: the share of arrivals
    naming their rank (``routed_dp_rank``); ``method``: ``--load-balance-method``. The oracle does
    not run upstream's ``DataParallelController``: it is sent the rank the model routed each arrival
    to, and compares what every rank's scheduler then does."""
    import random

    from specstate.multirank import RankConfig, make_model, per_rank_config, run_multi
    from specstate.multirank._run import random_actions

    ranks = RankConfig(oracle.n, oracle.n, True, load_balance_method=method)
    model = make_model(per_rank_config(config, ranks), ranks, policy)
    for i in range(cases):
        actions = random_actions(random.Random(seed * 1_000_003 + i), model, length, routed=routed)
        mine = run_multi(model, actions)
        theirs = oracle.run(oracle_config(config, oracle.n), mine.actions, routes_of(mine))
        bad = compare(mine, theirs)
        if bad is not None:
            return i + 1, bad, list(mine.actions)
    return cases, None, []
