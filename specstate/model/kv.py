"""Token-slot allocation shared by the target and draft KV pools, by token or by page.

Mirrors ``sglang/srt/mem_cache/allocator.py::TokenToKVPoolAllocator`` (``alloc``, ``free``,
``available_size``, ``backup_state`` / ``restore_state``), ``mem_cache/common.py::alloc_token_slots``
and ``::evict_from_tree_cache``; with ``--page-size P > 1``
``allocator.py::PagedTokenToKVPoolAllocator`` (``alloc_extend``, ``alloc_decode``, ``free``: the
unique pages of the indices, ``available_size = len(free_pages) * page_size``),
``mem_cache/common.py::alloc_paged_token_slots_extend`` / ``::alloc_paged_token_slots_decode``
(evict ``extend + bs * page_size`` / ``bs * page_size`` first, then take
``utils/common.py::get_num_new_pages`` pages: ``ceil(seq_len / P) - ceil(prefix_len / P)`` per
request, the last partial page filled first) and ``::release_kv_cache`` (the over-allocated
tail freed from ``ceil_align(kv_committed_len, P)``). Page size 1 takes the unpaged functions,
exactly as sglang's ``if page_size == 1`` branches do. Slot *indices* are not modelled, only counts: per request its
``kv_allocated_len`` (slots it owns past the ``cache_protected_len`` the radix tree owns),
``kv_committed_len`` (target KV written) and ``draft_kv_len`` (draft KV written at the same
slots); the tree's own slots are ``state.tree.total`` (``specstate.model.radix``).

Counting identity, asserted by the ``kv-accounting`` invariant after every step::

    kv_pool_size == kv_available + tree.evictable + tree.protected
                    + sum(ceil_align(req.kv_allocated_len, P) - req.cache_protected_len for every live request)

A request's slots are whole pages (a page holds positions ``[i * P, (i + 1) * P)`` of one request:
``alloc_extend`` keeps ``loc % P == position % P``); the tree holds whole pages only (its keys are
``RadixKey.page_aligned``), so ``cache_protected_len`` is a multiple of ``P`` and a request owns
``ceil(kv_allocated_len / P) - cache_protected_len / P`` pages (the ``kv-pages`` invariants).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specstate._deprecation import warn_renamed
from specstate.model.radix import evict
from specstate.model.state import ModelState

if TYPE_CHECKING:
    from specstate.model.ops_table import Ops

__all__ = ["OutOfSlots", "alloc_slots", "free_slots", "evict_from_tree_cache", "evict_from_tree_cache_op",
           "ceil_align", "new_pages", "alloc_extend_slots", "alloc_decode_slots", "held_slots"]


class OutOfSlots(RuntimeError):
    """``alloc_token_slots`` found too few free slots (SGLang raises ``RuntimeError`` there)."""


def evict_from_tree_cache_op(ops: "Ops", state: ModelState, num_tokens: int) -> ModelState:
    """The operation ``evict_from_tree_cache``, the shared core's (sglang 0.5.12's)
    ``mem_cache/common.py::evict_from_tree_cache``: if fewer than ``num_tokens`` slots are free,
    evict ``num_tokens`` tokens' LRU leaves of the radix tree (their slots return to the
    allocator). A release that evicts otherwise replaces the operation (0.5.17: only the
    shortfall, ``evict_from_tree_cache_v2`` in its folder's scheduler module)."""
    return _evict_asked(state, num_tokens)


def _evict_asked(state: ModelState, num_tokens: int) -> ModelState:
    if state.config.disable_radix_cache or state.kv_available >= num_tokens:
        return state
    tree, freed = evict(state.tree, num_tokens)
    return state.evolve(tree=tree, kv_available=state.kv_available + freed)


def evict_from_tree_cache(state: ModelState, num_tokens: int, ops: "Ops") -> ModelState:
    """The table's ``evict_from_tree_cache`` (``ops``'s: the release's)."""
    return ops.evict_from_tree_cache(ops, state, num_tokens)


def alloc_slots(state: ModelState, n: int, who: str, ops: "Ops | None" = None) -> ModelState:
    """``alloc_token_slots(tree_cache, n)``: evict from the tree if needed (``ops``'s
    ``evict_from_tree_cache``: the release's), take ``n`` slots or raise. Without ``ops`` (the old
    signature, deprecated) it evicts as the default table does (``evict_from_tree_cache_op``)."""
    if ops is None:
        warn_renamed("alloc_slots(state, n, who) (evicts as the default table does, whatever the release)",
                     "alloc_slots(state, n, who, ops) (the variant's table: the release's eviction)")
        state = _evict_asked(state, n)
    else:
        state = ops.evict_from_tree_cache(ops, state, n)
    if n > state.kv_available:
        raise OutOfSlots(
            f"Out of memory in {who}: need {n} token slots, available {state.kv_available}"
        )
    return state.evolve(kv_available=state.kv_available - n)


def free_slots(state: ModelState, n: int) -> ModelState:
    """``TokenToKVPoolAllocator.free``."""
    return state.evolve(kv_available=state.kv_available + n)


def ceil_align(n: int, page_size: int) -> int:
    """``utils/common.py::ceil_align``: ``n`` rounded up to a multiple of ``page_size``."""
    return -(-n // page_size) * page_size


def new_pages(rows: "list[tuple[int, int]] | tuple[tuple[int, int], ...]", page_size: int) -> int:
    """``utils/common.py::get_num_new_pages``: ``sum(ceil(seq_len / P) - ceil(prefix_len / P))``
    over ``(prefix_len, seq_len)`` rows (decode: a row whose new token opens a page)."""
    return sum(-(-end // page_size) - -(-start // page_size) for start, end in rows)


def held_slots(kv_allocated_len: int, cache_protected_len: int, page_size: int) -> int:
    """Slots a live request owns outside the tree: its pages past the tree's,
    ``ceil_align(kv_allocated_len, P) - cache_protected_len`` (``Req.own_slots`` at page size 1)."""
    if not kv_allocated_len:
        return 0
    return ceil_align(kv_allocated_len, page_size) - cache_protected_len


def alloc_extend_slots(state: ModelState, rows: "list[tuple[int, int]]", who: str, ops: "Ops") -> ModelState:
    """Allocate the positions ``[prefix_len, seq_len)`` of every row. Page size 1:
    ``alloc_token_slots(tree_cache, extend_num_tokens)`` (``alloc_slots``). Else
    ``mem_cache/common.py::alloc_paged_token_slots_extend``: evict ``extend_num_tokens + bs *
    page_size`` ("assume each request needs a new page"), then
    ``PagedTokenToKVPoolAllocator.alloc_extend`` takes ``get_num_new_pages`` pages (the last
    partial page of each row is filled first) or returns ``None`` (``RuntimeError``: "Prefill
    out of memory")."""
    page = state.config.page_size
    extend = sum(end - start for start, end in rows)
    if page == 1:
        return alloc_slots(state, extend, who, ops)
    state = ops.evict_from_tree_cache(ops, state, extend + len(rows) * page)
    need = new_pages(rows, page) * page
    if need > state.kv_available:
        raise OutOfSlots(f"Out of memory in {who}: need {need // page} pages of {page} tokens "
                         f"({extend} tokens), available {state.kv_available // page} pages")
    return state.evolve(kv_available=state.kv_available - need)


def alloc_decode_slots(state: ModelState, seq_lens: "list[int] | tuple[int, ...]", who: str, ops: "Ops") -> ModelState:
    """One new token per row, written at position ``seq_len``. Page size 1:
    ``alloc_token_slots(tree_cache, bs)``. Else ``mem_cache/common.py::alloc_for_decode`` ->
    ``alloc_paged_token_slots_decode``: evict ``bs * page_size``, then
    ``PagedTokenToKVPoolAllocator.alloc_decode`` takes a page for each row whose next length
    ``seq_len + 1`` is ``1 (mod P)`` (``get_num_new_pages(decode=True)``), or fails ("Decode out
    of memory")."""
    page = state.config.page_size
    if page == 1:
        return alloc_slots(state, len(seq_lens), who, ops)
    return _alloc_decode_paged(state, seq_lens, who, ops, page)


def _alloc_decode_paged(state: ModelState, seq_lens: "list[int] | tuple[int, ...]", who: str, ops: "Ops",
                        page: int) -> ModelState:
    state = ops.evict_from_tree_cache(ops, state, len(seq_lens) * page)
    need = sum(1 for L in seq_lens if (L + 1) % page == 1) * page
    if need > state.kv_available:
        raise OutOfSlots(f"Out of memory in {who}: need {need // page} pages of {page} tokens, "
                         f"available {state.kv_available // page} pages")
    return state.evolve(kv_available=state.kv_available - need)
