"""``Ops``: the table of named, replaceable operations.

Every real operation of the scheduler and the worker is one field here, holding a plain
function whose first argument is the ``Ops`` table itself (so an override of one operation
is seen by every other). A *variant* (a user's patch, or a known bug) is a set of
overrides: ``DEFAULT_OPS.replace(decide_speculation=my_rule)``.

The defaults are upstream sglang 0.5.12's v1 behaviour plus the corrected fallback
(``fallback_decode``); upstream never takes the fallback because its
``decide_speculation`` always says yes.

The last group holds the v2 family's own operations (sglang 0.5.17's ``EAGLEWorkerV2``, the
overlap scheduler and adaptive speculation, ``specstate.model.sglang_0_5_17``); the v2 family's variants
(``sglang_0_5_17/variants.py``) also replace shared ones (``iteration``, ``forward_batch_generation``,
``update_running_batch``, ``check_decode_mem``, ...). Under v2, ``process_batch_result_prefill``
and ``process_batch_result_decode`` take the ``PendingResult`` of last iteration's batch.

This module is the table's catalog: it imports the operations' modules and fills the shape
``Ops`` (``specstate/model/ops_table.py``, which they annotate with) with them.
"""

from __future__ import annotations

from specstate.model import admission as _a
from specstate.model import kv as _kv
from specstate.model import prefix_cache as _pc
from specstate.model import replay as _r
from specstate.model import scheduler as _s
from specstate.model.sglang_0_5_12 import worker as _w
from specstate.model.sglang_0_5_17 import aborts as _v2a
from specstate.model.sglang_0_5_17 import runtime as _v2r
from specstate.model.sglang_0_5_17 import scheduler as _v2s
from specstate.model.sglang_0_5_17 import start as _v2st
from specstate.model.sglang_0_5_17 import worker as _v2w
from specstate.model.ops_table import OP_NAMES, Ops, set_default_ops

__all__ = ["Ops", "DEFAULT_OPS", "OP_NAMES"]

DEFAULT_OPS = set_default_ops(Ops(
    # one scheduler loop iteration (v1: event_loop_normal; v2: event_loop_overlap)
    iteration=_s.event_loop_normal,
    # scheduler (scheduler.py, schedule_batch.py, scheduler_output_processor_mixin.py)
    arrive=_s.arrive,
    validate_input_length=_s.validate_input_length,
    abort=_s.abort,
    get_next_batch_to_run=_s.get_next_batch_to_run,
    merge_last_batch=_s.merge_last_batch,
    schedule_prefill=_s.schedule_prefill,
    mix_with_running=_s.mix_with_running,
    filter_batch=_s.filter_batch,
    filter_spec_info=_s.filter_spec_info,
    merge_batch=_s.merge_batch,
    merge_spec_info=_s.merge_spec_info,
    update_running_batch=_s.update_running_batch,
    check_decode_mem=_s.check_decode_mem,
    retract_decode=_s.retract_decode,
    prepare_for_decode=_s.prepare_for_decode,
    process_batch_result_prefill=_s.process_batch_result_prefill,
    process_batch_result_decode=_s.process_batch_result_decode,
    update_finish_state=_v2s.update_finish_state_op,
    idle=_s.idle,
    # admission and the radix cache (schedule_policy.py, schedule_batch.py, radix_cache.py)
    add_one_req=_a.add_one_req,
    init_next_round_input=_pc.init_next_round_input,
    cache_unfinished_req=_pc.cache_unfinished_req,
    release_kv_cache=_pc.release_kv_cache,
    evict_from_tree_cache=_kv.evict_from_tree_cache_op,
    # worker (eagle_worker.py, eagle_info.py, model runners)
    graph_runners=_w.graph_runners,
    forward_batch_generation=_w.forward_batch_generation,
    forward_target_extend=_w.forward_target_extend,
    forward_draft_extend=_w.forward_draft_extend,
    decide_speculation=_w.decide_speculation,
    decode=_w.decode,
    speculative_decode=_w.speculative_decode,
    draft=_w.draft,
    verify=_w.verify,
    free_rejected_slots=_w.free_rejected_slots,
    forward_draft_extend_after_decode=_w.forward_draft_extend_after_decode,
    fallback_decode=_w.fallback_decode,
    new_draft_input=_w.make_draft_input,
    # graph replay (cuda_graph_runner.py, eagle_draft_*_cuda_graph_runner.py, triton_backend.py)
    replay_prepare=_r.replay_prepare,
    init_forward_metadata_replay=_r.init_forward_metadata_replay,
    # the v2 family (sglang 0.5.17: overlap scheduler, EAGLEWorkerV2, adaptive speculation; model/sglang_0_5_17/)
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
    # the v2 engine start (model/sglang_0_5_17/start.py): server arguments, the shared logits buffer, captures
    engine_start=_v2st.engine_start,
    init_adaptive_speculative_params=_v2st.init_adaptive_speculative_params,
    graph_shared_output=_v2st.graph_shared_output,
    build_adaptive_runtime_state=_v2st.build_adaptive_runtime_state,
    capture_runner=_v2st.capture_runner,
))
