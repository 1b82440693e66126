"""``Ops``: the table of named, replaceable operations.

Every real operation of the scheduler and the worker is one field here, holding a plain
function whose first argument is the ``Ops`` table itself (so an override of one operation
is seen by every other). A *variant* (a user's patch, or a known bug) is a set of
overrides: ``DEFAULT_OPS.replace(decide_speculation=my_rule)``.

The defaults are upstream's v1 behaviour (the shared core's release) plus the corrected fallback
(``fallback_decode``); upstream never takes the fallback because its
``decide_speculation`` always says yes.

The operations a release brings that the shared table holds come from that release's folder,
asked (``Release.defaults``: ``<folder>/defaults.py``'s ``DEFAULTS``), never named here: the v1
worker from the core release (``decide_speculation``, ``verify``, ...), the v2 family's overlap
scheduler, ``EAGLEWorkerV2``, adaptive speculation and engine start from the release that first
models them; the v2 family's variants also replace shared ones (``iteration``,
``forward_batch_generation``, ``update_running_batch``, ``check_decode_mem``, ...). Under v2,
``process_batch_result_prefill`` and ``process_batch_result_decode`` take the ``PendingResult`` of
last iteration's batch.

This module is the table's catalog: it imports the shared operations' modules, asks the releases
for theirs, and fills the shape ``Ops`` (``specstate/model/ops_table.py``, which they annotate with)
with them.
"""

from __future__ import annotations

from typing import Any, Callable

from specstate.errors import InternalError
from specstate.model import admission as _a
from specstate.model import kv as _kv
from specstate.model import prefix_cache as _pc
from specstate.model import replay as _r
from specstate.model import scheduler as _s
from specstate.model.ops_table import OP_NAMES, Ops
from specstate.model.releases import each_release_gives, releases

__all__ = ["Ops", "DEFAULT_OPS", "OP_NAMES", "DEFAULT_OVERLAP_START", "default_ops"]


def _release_defaults() -> dict[str, Callable[..., Any]]:
    """Every release's part of the defaults (``Release.defaults``), oldest first; two releases giving
    one operation is an internal error (each operation has one first modelling release)."""
    return each_release_gives(lambda r: r.defaults, "default operation")


def _overlap_start() -> Callable[..., Any] | None:
    """The overlap scheduler's initial part, from the one release that gives it (``Release.overlap_start``)."""
    found = [(r.name, start) for r in releases() if (start := r.overlap_start) is not None]
    if len(found) > 1:
        raise InternalError(f"Expected one release to give the overlap scheduler's initial part but got {[n for n, _ in found]}")
    return found[0][1] if found else None


_SHARED: dict[str, Callable[..., Any]] = dict(
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
    idle=_s.idle,
    # admission and the radix cache (schedule_policy.py, schedule_batch.py, radix_cache.py)
    add_one_req=_a.add_one_req,
    init_next_round_input=_pc.init_next_round_input,
    cache_unfinished_req=_pc.cache_unfinished_req,
    release_kv_cache=_pc.release_kv_cache,
    evict_from_tree_cache=_kv.evict_from_tree_cache_op,
    # graph replay (cuda_graph_runner.py, eagle_draft_*_cuda_graph_runner.py, triton_backend.py)
    replay_prepare=_r.replay_prepare,
    init_forward_metadata_replay=_r.init_forward_metadata_replay,
)

DEFAULT_OPS = Ops(**_SHARED, **_release_defaults())


def default_ops() -> Ops:
    """``DEFAULT_OPS``, as a function (the variant surface's ``default_ops``)."""
    return DEFAULT_OPS

#: the overlap scheduler's initial part (``config -> OverlapPart``; ``None``: no release models it):
#: ``step.initial_state``'s default
DEFAULT_OVERLAP_START = _overlap_start()
