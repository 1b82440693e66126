"""The vLLM 0.34.0 family (``--engine vllm-0.34.0``): vLLM V1's scheduler and MRV2 worker with
dynamic speculative decoding (DSD), as a state machine of its own (docs/vllm.md).

Not an SGLang family: it has its own state (``state``: per-request ``num_computed_tokens``,
placeholders, drafts and the K they were drafted at; the queues; the block pool; K this step and
the last), its own ``step`` (``engine``), its own CUDA-graph plan and dispatch (``graphs``), its
config and DSD lookup (``config``), its launch flags (``flags``: ``vllm serve ...``), what the
shared commands ask of a launch (``launch``: ``is_serve``, ``parse``, ``DEFAULT_VARIANT``, ...) and its
variants (``variants``). Its parts above the model are its folder of the same name in
``specstate/integration/`` (its invariants, check, CPU oracle, CPU recording and conformance: the
invariants and the harnesses may import the model, the model may not import them); the shared code
asks for them by this folder's name (``model/releases.py::Release.part``) and names none of them.
Their citations are this release's (``citations.py::vllm_files``), not the SGLang core's.
"""

from specstate.model.vllm_0_34_0.config import VllmEngineConfig, build_dynamic_sd_schedule_lookup
from specstate.model.vllm_0_34_0.engine import UPSTREAM_OPS, Started, VOps, start, step
from specstate.model.vllm_0_34_0.state import StepRecord, VAction, VReq, VState

#: the ``--engine`` name (``model/releases.py::family_of_folder``)
ENGINE = "vllm-0.34.0"
#: the vLLM release it cites (its wheel: ``pip download --no-deps vllm==0.34.0``)
RELEASE = "0.34.0"
#: files outside this release's folders whose citations are vLLM 0.34.0's (``specstate/citations.py::_files``;
#: its folder in ``specstate/integration/`` is read by ``citations.py::vllm_files`` itself)
CITED_OUTSIDE = ("docs/vllm.md",)
#: its row in ``specstate engines`` (``cli/engines.py::vllm_rows``)
SUMMARY = ("vLLM V1 scheduler + MRV2 worker with dynamic speculative decoding (DSD): its own state machine "
           "(docs/vllm.md); judged by `specstate check -- vllm serve ...`")

__all__ = ["ENGINE", "RELEASE", "CITED_OUTSIDE", "SUMMARY", "VllmEngineConfig", "build_dynamic_sd_schedule_lookup", "VOps",
           "UPSTREAM_OPS", "Started", "start", "step", "StepRecord", "VAction", "VReq", "VState"]
