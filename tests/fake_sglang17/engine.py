"""A fake ``sglang.srt.entrypoints.engine`` for the 0.5.17 driver tests: an ``Engine`` whose
scheduler is the v2 model (``tests.sim_sglang17.Sim``), recording through the real 0.5.17
recorder hooks into the file the driver's control file names. Copied into a fake ``sglang``
package (and into a fake site tarball for the ``gpu_run_v17.sh`` rehearsal) by the tests."""

from __future__ import annotations

import asyncio
import json
import os
import random
import time

from specstate.integration.sglang_0_5_17 import recorder as hooks
from specstate.integration.sglang_0_5_17 import switch_patch
from specstate.model import Abort, Arrive, SpecConfig, Step
from tests.sim_sglang17 import Sim


class _TM:
    def __init__(self, engine: "Engine") -> None:
        self.engine = engine

    def abort_request(self, rid: str) -> None:
        self.engine.abort(rid)


def _done(r: object) -> bool:
    return getattr(r, "status").value in ("finished", "aborted")


class Engine:
    """Requests join one running stand-in scheduler as they come (``async_generate`` with the
    driver's delays, or ``generate`` for a whole wave); one stepping task loops it while it has
    work, yielding to the event loop between iterations (each costs a few ms of CPU here, about
    what an iteration costs on the GPU), so late joiners and aborts land mid-run as on the real
    engine."""

    def __init__(self, **kw: object) -> None:
        self.kw = kw
        adaptive = kw.get("speculative_adaptive", True) is not False
        text = None
        if adaptive:
            with open(str(kw["speculative_adaptive_config"])) as f:
                text = json.dumps(json.loads(f.read()))
        # a static launch runs the switch patch the environment names (the plugin's ``switch_patch``) as its
        # model variant; the patch's own hook decides each decode's counts beside it (``sim_sglang17._launch``)
        patch = switch_patch.config_from_env() if not adaptive else None
        self.variant = switch_patch.MODEL_VARIANT[patch.patch] if patch else "upstream-adaptive" if adaptive else "upstream-static"
        steps = int(kw["speculative_num_steps"])
        self.config = SpecConfig(speculative_num_steps=steps, speculative_eagle_topk=1,
                                 speculative_num_draft_tokens=int(kw["speculative_num_draft_tokens"]),
                                 disable_batch_threshold=patch.threshold if patch else None,
                                 cuda_graph_max_bs=int(kw["cuda_graph_max_bs_decode"]),
                                 max_running_requests=48, target_kv_pool_size=int(kw.get("max_total_tokens") or 65536),
                                 draft_kv_pool_size=int(kw.get("max_total_tokens") or 65536),
                                 chunked_prefill_size=int(kw.get("chunked_prefill_size") or 8192),
                                 cuda_graph_bs_override=tuple(kw["cuda_graph_bs_decode"]) if kw.get("cuda_graph_bs_decode") else None,  # type: ignore[arg-type]
                                 disable_overlap_schedule=False, speculative_adaptive=adaptive,
                                 speculative_adaptive_config=text)
        from specstate.model import get_variant

        get_variant(self.variant).configure(self.config)  # the engine's start: refuses what 0.5.17 refuses
        self.path = str(kw["speculative_adaptive_config"]) if adaptive else None
        self.dead: BaseException | None = None  #: the scheduler's crash (the worker raised): nothing runs after it
        self.loop = asyncio.new_event_loop()
        self.tokenizer_manager = _TM(self)
        self.rng = random.Random(0)
        self.sim: Sim | None = None
        self.v2: object = None  #: the last workload's overlap state (adaptive controller, active steps)
        self.rids: dict[str, int] = {}
        self.futures: dict[int, tuple[asyncio.Future, int]] = {}
        self.stepper: asyncio.Task | None = None
        if os.environ.get("FAKE_V17_CRASH_AT_START"):
            raise RuntimeError("fake engine start failure")
        if os.environ.get("FAKE_V17_HANG_AT_START"):
            time.sleep(3600)  # a start that never ends: the time limits must cut it

    def flush_cache(self) -> bool:
        if self.stepper is not None:
            self.loop.run_until_complete(self.stepper)
        if self.sim is not None:
            self.sim.close()
            self.v2 = self.sim.state.v2  # the controller outlives the workload, as in sglang
        self.sim = None
        return True

    def abort(self, rid: str) -> None:
        if self.sim is not None and rid in self.rids:  # an unknown rid: a no-op, as in sglang
            self.sim.feed([Abort(self.rids[rid])])
            self._start()

    def _start(self) -> None:
        if self.stepper is None or self.stepper.done():
            self.stepper = self.loop.create_task(self._steps())

    async def _steps(self) -> None:
        assert self.sim is not None
        try:
            while not self.sim.quiet():
                self.sim.feed([Step(accept=tuple(self.rng.randint(1, 4) for _ in range(48)))])
                self._resolve()
                await asyncio.sleep(0)
        except Exception as e:  # noqa: BLE001  (the worker raised: the scheduler process dies, as sglang's does)
            self._die(e)
            return
        self._resolve()

    def _die(self, e: BaseException) -> None:
        self.dead, self.sim = e, None  # no ``end`` line after the crash: the scheduler is gone
        for fut, _ in self.futures.values():
            if not fut.done():
                fut.set_exception(RuntimeError(f"the scheduler died: {type(e).__name__}: {e}"))
        self.futures.clear()

    def _resolve(self) -> None:
        assert self.sim is not None
        for idx, (fut, mnt) in list(self.futures.items()):
            r = self.sim.state.req(idx)
            if _done(r) and not fut.done():
                kind = "abort" if r.status.value == "aborted" else "length"
                fut.set_result({"output_ids": [0] * min(r.output_len, mnt), "meta_info": {"finish_reason": {"type": kind}}})
                del self.futures[idx]

    async def async_generate(self, input_ids, sampling_params, rid):  # noqa: ANN001, ANN201
        if self.dead is not None:
            raise RuntimeError(f"the scheduler died: {type(self.dead).__name__}: {self.dead}")
        if self.sim is None:
            hooks.REC.poll_ctl()
            self.sim = Sim(self.config, self.variant, adaptive_path=self.path, resume=self.v2)
            self.rids = {}
        idx = self.rids[rid] = len(self.rids)
        self.sim.sched.names.append(rid)
        self.sim.feed([Arrive(len(input_ids), int(sampling_params["max_new_tokens"]))])
        fut = self.loop.create_future()
        self.futures[idx] = (fut, int(sampling_params["max_new_tokens"]))
        self._start()
        return await fut

    def generate(self, input_ids, sampling_params, rid):  # noqa: ANN001, ANN201
        if not isinstance(rid, list):
            return self.loop.run_until_complete(self.async_generate(input_ids[0], sampling_params, rid))

        async def all_() -> list:
            return list(await asyncio.gather(*(self.async_generate(i, sp, r)
                                               for i, sp, r in zip(input_ids, sampling_params, rid))))
        return self.loop.run_until_complete(all_())

    def shutdown(self) -> None:
        self.flush_cache()
        hooks.REC._close()
