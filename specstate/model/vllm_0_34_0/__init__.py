"""The vLLM 0.34.0 family (``--engine vllm-0.34.0``): vLLM V1's scheduler and MRV2 worker with
dynamic speculative decoding (DSD), as a state machine of its own (docs/vllm.md).

Not an SGLang family: it has its own state (``state``: per-request ``num_computed_tokens``,
placeholders, drafts and the K they were drafted at; the queues; the block pool; K this step and
the last), its own ``step`` (``engine``), its own CUDA-graph plan and dispatch (``graphs``), its
config and DSD lookup (``config``), its launch flags (``flags``: ``vllm serve ...``) and its
variants (``variants``). Its invariants are ``specstate/invariants/vllm_0_34_0.py`` (the shared
``Violation``), its check ``specstate/launch_check/vllm.py``, its CPU oracle
``specstate/oracle/vllm_0_34_0.py``: those files cite vLLM, so they are this release's
(``CITED_OUTSIDE``), not the SGLang core's.
"""

from specstate.model.vllm_0_34_0.config import VllmEngineConfig, build_dynamic_sd_schedule_lookup
from specstate.model.vllm_0_34_0.engine import UPSTREAM_OPS, Started, VOps, start, step
from specstate.model.vllm_0_34_0.state import StepRecord, VAction, VReq, VState

#: the ``--engine`` name (``model/releases.py::family_of_folder``)
ENGINE = "vllm-0.34.0"
#: the vLLM release it cites (its wheel: ``pip download --no-deps vllm==0.34.0``)
RELEASE = "0.34.0"
#: files outside this folder whose citations are vLLM 0.34.0's (``specstate/citations.py::_files``)
CITED_OUTSIDE = ("specstate/invariants/vllm_0_34_0.py", "specstate/launch_check/vllm.py",
                 "specstate/oracle/vllm_0_34_0.py", "specstate/oracle/vllm_cpu_record.py",
                 "specstate/oracle/vllm_cpu_conform.py", "docs/vllm.md")

__all__ = ["ENGINE", "RELEASE", "CITED_OUTSIDE", "VllmEngineConfig", "build_dynamic_sd_schedule_lookup", "VOps",
           "UPSTREAM_OPS", "Started", "start", "step", "StepRecord", "VAction", "VReq", "VState"]
