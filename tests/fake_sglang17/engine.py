"""A fake ``sglang.srt.entrypoints.engine`` for the 0.5.17 driver tests: an ``Engine`` whose
scheduler is the v2 model (``tests.sim_sglang17.Sim``), recording through the real 0.5.17
recorder hooks into the file the driver's control file names. Copied into a fake ``sglang``
package (and into a fake site tarball for the ``gpu_run_v17.sh`` rehearsal) by the tests."""

from __future__ import annotations

import asyncio
import json
import os
import random

from specstate.integration.sglang_0_5_17 import recorder as hooks
from specstate.model import Arrive, SpecConfig, Step
from tests.sim_sglang17 import Sim


class _TM:
    def abort_request(self, rid: str) -> None:
        pass


class Engine:
    def __init__(self, **kw: object) -> None:
        self.kw = kw
        with open(str(kw["speculative_adaptive_config"])) as f:
            text = f.read()
        self.config = SpecConfig(speculative_num_steps=int(kw["speculative_num_steps"]), speculative_eagle_topk=1,
                                 speculative_num_draft_tokens=int(kw["speculative_num_draft_tokens"]),
                                 disable_batch_threshold=None, cuda_graph_max_bs=int(kw["cuda_graph_max_bs_decode"]),
                                 max_running_requests=48, target_kv_pool_size=65536, draft_kv_pool_size=65536,
                                 disable_overlap_schedule=False, speculative_adaptive_config=json.dumps(json.loads(text)))
        self.path = str(kw["speculative_adaptive_config"])
        self.loop = asyncio.new_event_loop()
        self.tokenizer_manager = _TM()
        self.rng = random.Random(0)
        self.sim: Sim | None = None
        self.rids: dict[str, int] = {}
        if os.environ.get("FAKE_V17_CRASH_AT_START"):
            raise RuntimeError("fake engine start failure")

    def flush_cache(self) -> bool:
        if self.sim is not None:
            self.sim.close()
        self.sim = None
        return True

    def _run(self, reqs: list[tuple[list[int], dict, str]]) -> list[dict]:
        if self.sim is None:
            hooks.REC.poll_ctl()
            self.sim, self.rids = Sim(self.config, "upstream-adaptive", adaptive_path=self.path), {}
        for ids, sp, rid in reqs:
            self.rids[rid] = len(self.rids)
            self.sim.sched.names.append(rid)
            self.sim.feed([Arrive(len(ids), int(sp["max_new_tokens"]))])
        for _ in range(10_000):
            if self.sim.quiet():
                break
            self.sim.feed([Step(accept=tuple(self.rng.randint(1, 4) for _ in range(48)))])
        s = self.sim.state
        return [{"output_ids": [0] * min(s.req(self.rids[rid]).output_len, int(sp["max_new_tokens"])),
                 "meta_info": {"finish_reason": {"type": "length"}}} for _, sp, rid in reqs]

    def generate(self, input_ids, sampling_params, rid):  # noqa: ANN001, ANN201
        if isinstance(rid, list):
            return self._run(list(zip(input_ids, sampling_params, rid)))
        return self._run([(input_ids[0], sampling_params, rid)])[0]

    async def async_generate(self, input_ids, sampling_params, rid):  # noqa: ANN001, ANN201
        return self._run([(input_ids, sampling_params, rid)])[0]

    def shutdown(self) -> None:
        self.flush_cache()
        hooks.REC._close()
