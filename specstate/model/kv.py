"""Token-slot allocation shared by the target and draft KV pools (page size 1).

Mirrors ``sglang/srt/mem_cache/allocator.py::TokenToKVPoolAllocator`` (``alloc``, ``free``,
``available_size``, ``backup_state`` / ``restore_state``), ``mem_cache/common.py::alloc_token_slots``
and ``::release_kv_cache``. Slot *indices* are not modelled, only counts per request; the
two pools are the per-request ``kv_committed_len`` (target KV written) and ``draft_kv_len``
(draft KV written at the same slots).
"""

from __future__ import annotations

from specstate.model.request import Req
from specstate.model.state import ModelState

__all__ = ["OutOfSlots", "alloc_slots", "free_slots", "release_kv_cache"]


class OutOfSlots(RuntimeError):
    """``alloc_token_slots`` found too few free slots (SGLang raises ``RuntimeError`` there)."""


def alloc_slots(state: ModelState, n: int, who: str) -> ModelState:
    """``alloc_token_slots(tree_cache, n)``: take ``n`` slots or raise."""
    if n > state.kv_available:
        raise OutOfSlots(
            f"Out of memory in {who}: need {n} token slots, available {state.kv_available}"
        )
    return state.evolve(kv_available=state.kv_available - n)


def free_slots(state: ModelState, n: int) -> ModelState:
    """``TokenToKVPoolAllocator.free``."""
    return state.evolve(kv_available=state.kv_available + n)


def release_kv_cache(state: ModelState, req: Req) -> tuple[ModelState, Req]:
    """``mem_cache/common.py::release_kv_cache``: free every slot the request owns."""
    state = free_slots(state, req.kv_allocated_len)
    return state, req.evolve(kv_allocated_len=0, kv_committed_len=0, draft_kv_len=0)
