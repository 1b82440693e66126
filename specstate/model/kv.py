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

from typing import TYPE_CHECKING

from specstate._deprecation import warn_renamed
from specstate.model.ops_table import default_ops
from specstate.model.radix import evict
from specstate.model.state import ModelState

if TYPE_CHECKING:
    from specstate.model.ops_table import Ops

__all__ = ["OutOfSlots", "alloc_slots", "free_slots", "evict_from_tree_cache", "evict_from_tree_cache_op"]


class OutOfSlots(RuntimeError):
    """``alloc_token_slots`` found too few free slots (SGLang raises ``RuntimeError`` there)."""


def evict_from_tree_cache_op(ops: "Ops", state: ModelState, num_tokens: int) -> ModelState:
    """The operation ``evict_from_tree_cache``, sglang 0.5.12's
    ``mem_cache/common.py::evict_from_tree_cache``: if fewer than ``num_tokens`` slots are free,
    evict ``num_tokens`` tokens' LRU leaves of the radix tree (their slots return to the
    allocator). A release that evicts otherwise replaces the operation (0.5.17: only the
    shortfall, ``evict_from_tree_cache_v2`` in its folder's scheduler module)."""
    if state.config.disable_radix_cache or state.kv_available >= num_tokens:
        return state
    tree, freed = evict(state.tree, num_tokens)
    return state.evolve(tree=tree, kv_available=state.kv_available + freed)


def evict_from_tree_cache(state: ModelState, num_tokens: int, ops: "Ops | None" = None) -> ModelState:
    """The table's ``evict_from_tree_cache`` (``ops``'s; without it the default table's)."""
    ops = ops or default_ops()
    return ops.evict_from_tree_cache(ops, state, num_tokens)


def alloc_slots(state: ModelState, n: int, who: str, ops: "Ops | None" = None) -> ModelState:
    """``alloc_token_slots(tree_cache, n)``: evict from the tree if needed (``ops``'s
    ``evict_from_tree_cache``: the release's), take ``n`` slots or raise."""
    if ops is None:
        warn_renamed("alloc_slots(state, n, who) (evicts as the default table does, sglang 0.5.12)",
                     "alloc_slots(state, n, who, ops) (the variant's table: the release's eviction)")
        ops = default_ops()
    state = ops.evict_from_tree_cache(ops, state, n)
    if n > state.kv_available:
        raise OutOfSlots(
            f"Out of memory in {who}: need {n} token slots, available {state.kv_available}"
        )
    return state.evolve(kv_available=state.kv_available - n)


def free_slots(state: ModelState, n: int) -> ModelState:
    """``TokenToKVPoolAllocator.free``."""
    return state.evolve(kv_available=state.kv_available + n)
