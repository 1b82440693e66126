"""The shape of ``Ops``, the table of named, replaceable operations (no operation here).

Every real operation of the scheduler and the worker is one field of ``Ops``, holding a plain
function whose first argument is the ``Ops`` table itself (so an override of one operation is
seen by every other). The operations' modules (``scheduler``, ``worker``, ``admission``, ...,
the release folders) name this class in their annotations; the catalog ``specstate/model/ops.py``
imports them and fills the table's defaults (``DEFAULT_OPS``), so that no operation module imports
the module that imports it. Nothing here holds that table: a function that runs operations is
handed the table it runs (``step(state, action, ops)``), and a table made from another by
``replace`` keeps the one it came from (``overridden`` compares with it).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Callable

from specstate.errors import UnknownName

__all__ = ["Ops", "OP_NAMES"]


@dataclass(frozen=True)
class Ops:
    # one scheduler loop iteration (v1: event_loop_normal; v2: event_loop_overlap)
    iteration: Callable[..., Any]
    # scheduler (scheduler.py, schedule_batch.py, scheduler_output_processor_mixin.py)
    arrive: Callable[..., Any]
    validate_input_length: Callable[..., Any]
    abort: Callable[..., Any]
    get_next_batch_to_run: Callable[..., Any]
    merge_last_batch: Callable[..., Any]
    schedule_prefill: Callable[..., Any]
    mix_with_running: Callable[..., Any]
    filter_batch: Callable[..., Any]
    filter_spec_info: Callable[..., Any]
    merge_batch: Callable[..., Any]
    merge_spec_info: Callable[..., Any]
    update_running_batch: Callable[..., Any]
    check_decode_mem: Callable[..., Any]
    retract_decode: Callable[..., Any]
    prepare_for_decode: Callable[..., Any]
    process_batch_result_prefill: Callable[..., Any]
    process_batch_result_decode: Callable[..., Any]
    update_finish_state: Callable[..., Any]  #: v2 result processing (``Req.update_finish_state``)
    idle: Callable[..., Any]
    # admission and the radix cache (schedule_policy.py, schedule_batch.py, radix_cache.py)
    add_one_req: Callable[..., Any]
    init_next_round_input: Callable[..., Any]
    cache_unfinished_req: Callable[..., Any]
    release_kv_cache: Callable[..., Any]
    evict_from_tree_cache: Callable[..., Any]  #: ``mem_cache/common.py``: how much the tree gives back (kv.py)
    # worker (eagle_worker.py, eagle_info.py, model runners)
    graph_runners: Callable[..., Any]
    forward_batch_generation: Callable[..., Any]
    forward_target_extend: Callable[..., Any]
    forward_draft_extend: Callable[..., Any]
    decide_speculation: Callable[..., Any]
    decode: Callable[..., Any]
    speculative_decode: Callable[..., Any]
    draft: Callable[..., Any]
    verify: Callable[..., Any]
    free_rejected_slots: Callable[..., Any]
    forward_draft_extend_after_decode: Callable[..., Any]
    fallback_decode: Callable[..., Any]
    new_draft_input: Callable[..., Any]
    # graph replay (cuda_graph_runner.py, eagle_draft_*_cuda_graph_runner.py, triton_backend.py)
    replay_prepare: Callable[..., Any]
    init_forward_metadata_replay: Callable[..., Any]
    # the v2 family (sglang 0.5.17: overlap scheduler, EAGLEWorkerV2, adaptive speculation; model/sglang_0_5_17/)
    process_pending_result: Callable[..., Any]
    process_pending_chunked_abort: Callable[..., Any]
    eagle_prepare_for_decode: Callable[..., Any]
    alloc_reserve_per_decode: Callable[..., Any]
    runtime_states: Callable[..., Any]
    resolve_spec_v2_tokens: Callable[..., Any]
    activate_step_by_batch: Callable[..., Any]
    on_verify_complete: Callable[..., Any]
    apply_runtime_state: Callable[..., Any]
    draft_v2: Callable[..., Any]
    build_trivial_verify_input: Callable[..., Any]
    verify_v2: Callable[..., Any]
    draft_extend_for_decode: Callable[..., Any]
    draft_extend_for_prefill: Callable[..., Any]
    # the v2 engine start (model/sglang_0_5_17/start.py): server arguments, the shared logits buffer, captures
    engine_start: Callable[..., Any]
    init_adaptive_speculative_params: Callable[..., Any]
    graph_shared_output: Callable[..., Any]
    build_adaptive_runtime_state: Callable[..., Any]
    capture_runner: Callable[..., Any]


    def replace(self, **overrides: Callable[..., Any]) -> "Ops":
        unknown = set(overrides) - set(OP_NAMES)
        if unknown:
            raise UnknownName(f"Expected operation names from {sorted(OP_NAMES)} but got {sorted(unknown)}")
        made = replace(self, **overrides)
        object.__setattr__(made, "_made_from", self.made_from)  # not a field: equality and OP_NAMES unchanged
        return made

    @property
    def made_from(self) -> "Ops":
        """The table this one was made from by ``replace`` (through any number of them); itself when
        it was built whole (the catalog's ``DEFAULT_OPS``)."""
        found: Ops = self.__dict__.get("_made_from", self)
        return found

    def overridden(self) -> dict[str, str]:
        """Operation name -> qualified name of every function that differs from the table this one
        was made from (``made_from``: for a variant's table, ``DEFAULT_OPS``)."""
        defaults = self.made_from
        out = {}
        for f in fields(self):
            fn = getattr(self, f.name)
            if fn is not getattr(defaults, f.name):
                out[f.name] = f"{fn.__module__}.{fn.__qualname__}"
        return out


OP_NAMES: tuple[str, ...] = tuple(f.name for f in fields(Ops))
