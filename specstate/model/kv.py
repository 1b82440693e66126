"""Token-slot allocation shared by the target and draft KV pools (page size 1).

Mirrors ``sglang/srt/mem_cache/allocator.py::TokenToKVPoolAllocator`` (``alloc``, ``free``,
``available_size``, ``backup_state`` / ``restore_state``), ``mem_cache/common.py::alloc_token_slots``
and ``::evict_from_tree_cache``. Slot *indices* are not modelled, only counts: per request its
``kv_allocated_len`` (slots it owns past the ``cache_protected_len`` the radix tree owns),
``kv_committed_len`` (target KV written) and ``draft_kv_len`` (draft KV written at the same
slots); the tree's own slots are ``state.tree.total`` (``specstate.model.radix``).

Counting identity, asserted by the ``kv-accounting`` invariant after every step::

    kv_pool_size == kv_available + tree.evictable + tree.protected
                    + sum(req.kv_allocated_len - req.cache_protected_len for every live request)
"""

from __future__ import annotations

from specstate.model.radix import evict
from specstate.model.state import ModelState

__all__ = ["OutOfSlots", "alloc_slots", "free_slots", "evict_from_tree_cache"]


class OutOfSlots(RuntimeError):
    """``alloc_token_slots`` found too few free slots (SGLang raises ``RuntimeError`` there)."""


def evict_from_tree_cache(state: ModelState, num_tokens: int) -> ModelState:
    """``mem_cache/common.py::evict_from_tree_cache``: if fewer than ``num_tokens`` slots are
    free, evict LRU leaves of the radix tree (their slots return to the allocator): that many
    tokens in sglang 0.5.12, only the shortfall in 0.5.17 (the v2 family, ``state.v2``)."""
    if state.config.disable_radix_cache or state.kv_available >= num_tokens:
        return state
    tree, freed = evict(state.tree, num_tokens - state.kv_available if state.v2 is not None else num_tokens)
    return state.evolve(tree=tree, kv_available=state.kv_available + freed)


def alloc_slots(state: ModelState, n: int, who: str) -> ModelState:
    """``alloc_token_slots(tree_cache, n)``: evict from the tree if needed, take ``n`` slots
    or raise."""
    state = evict_from_tree_cache(state, n)
    if n > state.kv_available:
        raise OutOfSlots(
            f"Out of memory in {who}: need {n} token slots, available {state.kv_available}"
        )
    return state.evolve(kv_available=state.kv_available - n)


def free_slots(state: ModelState, n: int) -> ModelState:
    """``TokenToKVPoolAllocator.free``."""
    return state.evolve(kv_available=state.kv_available + n)
