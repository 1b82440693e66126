"""Static speculation and the seed's switch on sglang 0.5.23's ``EAGLEWorkerV2``: 0.5.17's
(``sglang_0_5_17/static.py``) over 0.5.23's operations, named ``NAME@sglang-0.5.23``
(``--engine sglang-0.5.23 --variant v2-static-switch`` picks it: ``_engine_option.py``).

What differs is below the patch: 0.5.23 still builds the adaptive controller only
``if spec.speculative_adaptive`` (``speculative/eagle_worker_v2.py::EAGLEWorkerV2.activate_step_by_batch``
and ``EAGLEWorkerV2.on_verify_complete_cpu`` guard on it, as 0.5.17's), sizes the shared logits
buffer from ``max_speculative_num_draft_tokens`` alone without it
(``model_executor/model_runner.py::ModelRunner.max_decode_logits_rows``: the candidates only
``if spec.speculative_adaptive``; ``start.graph_shared_output_v23``), and captures the draft extend
at the runtime state's own width (``runtime.runtime_states_own_width``): the launch's state is the
only one, at ``steps + 1``, so the naive patch's stale width meets the same graph and crashes alike.
"""

from __future__ import annotations

from specstate.model.variant_registry import SEED_THRESHOLD_FLAG, Variant, register
from specstate.model.sglang_0_5_17.static import STATIC, switch_overrides
from specstate.model.sglang_0_5_23.runtime import runtime_states_own_width

__all__ = ["UPSTREAM_STATIC_V23", "SWITCH_NAIVE_V23", "SWITCH_V23"]

NAME = "sglang-0.5.23"

UPSTREAM_STATIC_V23 = register(Variant(
    f"upstream-static@{NAME}", "sglang 0.5.23 as shipped, launched without --speculative-adaptive: no adaptive "
    "controller, the launch's step count on every decode", base="upstream-v23", config_changes=STATIC, correct=True,
    scenario="static-sweep"))

SWITCH_NAIVE_V23 = register(Variant(
    f"v2-static-switch-naive@{NAME}", "the seed's switch on 0.5.23's EAGLEWorkerV2 (static launch), only "
    "speculative_num_steps set: the draft extend keeps the launch's width", base=f"upstream-static@{NAME}",
    overrides=switch_overrides(runtime_states_own_width, naive=True), flags=(SEED_THRESHOLD_FLAG,),
    expected_invariant="worker-crash", scenario="static-sweep"))

SWITCH_V23 = register(Variant(
    f"v2-static-switch@{NAME}", "the seed's switch on 0.5.23's EAGLEWorkerV2, corrected: steps 0 and 1 draft "
    "token above the threshold (runners kept: steps 0 runs eager)", base=f"upstream-static@{NAME}",
    overrides=switch_overrides(runtime_states_own_width, naive=False), flags=(SEED_THRESHOLD_FLAG,), correct=True,
    scenario="static-sweep"))
