"""The operations 0.5.17 gives the shared ``Ops`` table as its defaults: the overlap scheduler, the
``EAGLEWorkerV2`` and adaptive speculation (``sglang/srt/speculative/eagle_worker_v2.py``,
``managers/scheduler.py::Scheduler.event_loop_overlap``), which every later overlap release shares,
the engine start (``start.py``) and the overlap scheduler's initial part (``OVERLAP_START``). The table's catalog (``specstate/model/ops.py``) asks every
release for its ``DEFAULTS`` (``Release.defaults``) and names none.
"""

from __future__ import annotations

from typing import Any, Callable

from specstate.model.sglang_0_5_17 import aborts as _v2a
from specstate.model.sglang_0_5_17 import runtime as _v2r
from specstate.model.sglang_0_5_17 import scheduler as _v2s
from specstate.model.sglang_0_5_17 import start as _v2st
from specstate.model.sglang_0_5_17 import state as _v2state
from specstate.model.sglang_0_5_17 import worker as _v2w

__all__ = ["DEFAULTS", "OVERLAP_START"]

#: operation name -> function: this release's part of ``DEFAULT_OPS``
DEFAULTS: dict[str, Callable[..., Any]] = dict(
    update_finish_state=_v2s.update_finish_state_op,
    # the overlap scheduler, EAGLEWorkerV2, adaptive speculation
    process_pending_result=_v2s.process_pending_result,
    process_pending_chunked_abort=_v2a.process_pending_chunked_abort,
    eagle_prepare_for_decode=_v2s.eagle_prepare_for_decode,
    alloc_reserve_per_decode=_v2s.alloc_reserve_per_decode,
    runtime_states=_v2r.adaptive_runtime_states,
    resolve_spec_v2_tokens=_v2s.resolve_spec_v2_tokens,
    activate_step_by_batch=_v2w.activate_step_by_batch,
    on_verify_complete=_v2w.on_verify_complete,
    apply_runtime_state=_v2w.apply_runtime_state,
    draft_v2=_v2w.draft_v2,
    build_trivial_verify_input=_v2w.build_trivial_verify_input,
    verify_v2=_v2w.verify_v2,
    draft_extend_for_decode=_v2w.draft_extend_for_decode,
    draft_extend_for_prefill=_v2w.draft_extend_for_prefill,
    # the engine start (start.py): server arguments, the shared logits buffer, captures
    engine_start=_v2st.engine_start,
    init_adaptive_speculative_params=_v2st.init_adaptive_speculative_params,
    graph_shared_output=_v2st.graph_shared_output,
    build_adaptive_runtime_state=_v2st.build_adaptive_runtime_state,
    capture_runner=_v2st.capture_runner,
)

#: the overlap scheduler's initial part (``AdaptiveController.__init__`` + ``init_states``,
#: ``state.initial_overlap_state``): ``step.initial_state`` builds every overlap launch's start with it
OVERLAP_START = _v2state.initial_overlap_state
