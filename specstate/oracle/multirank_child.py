"""One DP rank of the N-rank oracle: ``python -m specstate.oracle.multirank_child RANK N INIT``.

Upstream sglang 0.5.12's ``Scheduler`` and ``event_loop_normal`` with DP attention, on the
single-rank oracle's fake model worker (``integration/sglang_0_5_12/oracle.py``, reused unchanged) through three
substitutions (every-rank.md §7): an N-rank gloo group (``parallel_state.init_distributed_environment``
with ``world_size=N``, ``initialize_model_parallel(tensor_model_parallel_size=N)``), ``ServerArgs``
with ``enable_dp_attention=True, dp_size=N, tp_size=N``, and a ``Scheduler`` of ``tp_rank=dp_rank=RANK``
built after ``dp_attention.py::initialize_dp_attention``. Every rank reads the same workload (one
JSON line per workload on stdin) and takes the arrivals round robin sends it
(``DataParallelController.round_robin_scheduler``: arrival ``i`` to rank ``i % N``); the ranks run in
lock step because every iteration's MLP sync is a gloo all-gather among them.

Per iteration it records what the rank gathered (``MLPSyncBatchInfo.all_gather``: every rank's
``num_tokens`` and ``is_extend_in_batch``, in order) and the batch it ran (kind and rows, or none),
and answers one JSON line per workload.
"""

from __future__ import annotations

import importlib
import io
import json
import logging
import sys
import traceback
import warnings
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from specstate.oracle.driver import Driver, rid_name

__all__ = ["main", "RankDriver"]

_MODELS = Path(__file__).resolve().parents[1] / "integration" / "sglang_assets" / "models"


class RankDriver(Driver):
    """The single-rank driver, for one rank: its own arrivals only, and a record per iteration."""

    def __init__(self, actions: Any, max_accept: int, rank: int, n: int, routes: Any = None) -> None:
        super().__init__(actions, max_accept)
        self.rank, self.n = rank, n
        #: per arrival, the rank it reaches (the model's routing: an explicit ``routed_dp_rank`` or
        #: ``--load-balance-method total_requests``); ``None``: round robin, arrival ``i`` to ``i % N``
        self.routes = routes
        self.iterations: list[dict[str, Any]] = []
        self.current: dict[str, Any] | None = None

    def recv_requests(self, release: Any) -> list[Any]:
        if self.current is not None:
            self.iterations.append(self.current)
        self.current = None
        if self.pos >= len(self.actions):
            from specstate.oracle.driver import WorkloadDone
            raise WorkloadDone
        from specstate.model import Abort, Arrive

        inputs: list[Any] = []
        while self.pos < len(self.actions):
            a = self.actions[self.pos]
            self.pos += 1
            if isinstance(a, Arrive):
                if self._owner(self.arrived) == self.rank:
                    inputs.append(release.generate_req(rid_name(self.arrived), self.prompts[self.arrived],
                                                       a.max_new_tokens))
                self.arrived += 1
            elif isinstance(a, Abort):
                if self._owner(a.rid) == self.rank:
                    inputs.append(release.abort_req(rid_name(a.rid)))
            else:
                self.step = a
                self.eos |= set(a.eos)
                self.current = {"syncs": [], "batch": "none", "rows": 0}
                return inputs
        self.sched.process_input_requests(inputs)
        from specstate.oracle.driver import WorkloadDone
        raise WorkloadDone

    def _owner(self, rid: int) -> int:
        return int(self.routes[rid]) if self.routes is not None else rid % self.n

    def around_run_batch(self, release: Any, run: Any, batch: Any) -> Any:
        self.batch = batch
        mode = batch.forward_mode
        kind = "idle" if mode.is_idle() else ("prefill" if mode.is_extend() else "decode")
        if self.current is not None:
            self.current.update(batch=kind, rows=len(batch.reqs))
        return run(batch)

    def synced(self, info: Any) -> None:
        if self.current is not None:
            self.current["syncs"].append([[int(x) for x in info.global_num_tokens], bool(info.is_extend_in_batch)])

    def finish(self, release: Any) -> None:
        if self.current is not None:
            self.iterations.append(self.current)
            self.current = None


def _substitute(adapter: Any, rank: int, n: int, init: str) -> None:
    """The three substitutions, and the sync recorder."""
    import torch
    from types import SimpleNamespace

    def init_distributed() -> None:
        from sglang.srt.distributed import parallel_state as ps

        ps.init_distributed_environment(world_size=n, rank=rank, local_rank=rank, backend="gloo",
                                        distributed_init_method="file://" + init)
        ps.initialize_model_parallel(tensor_model_parallel_size=n)

    def server_args(cfg: dict[str, Any], models: str) -> Any:
        from sglang.srt.server_args import ServerArgs

        kw = adapter.server_args_kwargs(cfg, models, overlap=False)
        return ServerArgs(**kw, enable_dp_attention=True, dp_size=n, tp_size=n)

    def construct_scheduler(sa: Any) -> Any:
        from sglang.srt.layers.dp_attention import initialize_dp_attention
        from sglang.srt.server_args import PortArgs, set_global_server_args_for_scheduler

        set_global_server_args_for_scheduler(sa)
        initialize_dp_attention(sa, SimpleNamespace(hidden_size=adapter.HIDDEN, dtype=torch.bfloat16))
        from sglang.srt.managers.scheduler import Scheduler

        return Scheduler(sa, PortArgs.init_new(sa), gpu_id=0, tp_rank=rank, moe_ep_rank=0, pp_rank=0, attn_cp_rank=0,
                         moe_dp_rank=0, dp_rank=rank)

    adapter.init_distributed, adapter._server_args, adapter.construct_scheduler = init_distributed, server_args, construct_scheduler
    from sglang.srt.managers import scheduler_dp_attn_mixin as mixin

    gather = mixin.MLPSyncBatchInfo.all_gather

    def all_gather(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = gather(self, *args, **kwargs)
        driver = getattr(adapter._Current, "driver", None)
        if isinstance(driver, RankDriver):
            driver.synced(self)
        return out

    mixin.MLPSyncBatchInfo.all_gather = all_gather


def _run(adapter: Any, request: dict[str, Any], rank: int, n: int) -> dict[str, Any]:
    from specstate.schema import action_from_data

    actions = [action_from_data(a) for a in request["actions"]]
    driver = RankDriver(actions, request["config"]["speculative_num_steps"] + 1, rank, n, request.get("routes"))
    out: dict[str, Any] = {"rank": rank}
    try:
        adapter.run(request["config"], driver, str(_MODELS))
    except Exception as e:  # noqa: BLE001  (upstream raised: reported with the iterations so far)
        out["error"] = f"{type(e).__name__}: {e}"[:2000]
        out["traceback"] = traceback.format_exc()[-3000:]
    out["iterations"] = driver.iterations
    return out


def main(argv: list[str] | None = None) -> int:
    from specstate.oracle import stubs
    from specstate.oracle.catalog import core_release, module_of
    from specstate.oracle.child import _private_files
    from specstate.oracle.wheels import OracleUnavailable, importable

    rank, n, init = (argv or sys.argv[1:])[:3]
    _private_files()  # its own temporary files in a private folder; SIGINT / SIGTERM end it at once
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    noise = io.StringIO()
    try:
        with redirect_stdout(noise):
            stubs.install(importable(core_release()))
            adapter = importlib.import_module(module_of(core_release()))
            _substitute(adapter, int(rank), int(n), init)
    except OracleUnavailable as e:
        print(json.dumps({"unavailable": str(e)}), flush=True)
        return 0
    for line in sys.stdin:
        if line.strip():
            with redirect_stdout(noise):
                out = _run(adapter, json.loads(line), int(rank), int(n))
            noise.seek(0)
            noise.truncate()
            print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    from specstate.oracle.child import exit_at_once

    exit_at_once(main())
