"""Requests meet the radix cache: prefix matches, caching a prefill, releasing a request.

Owns nothing of its own; it moves slots between a request, the radix tree
(``specstate.model.radix``) and the allocator (``specstate.model.kv``). Mirrors
``sglang/srt/managers/schedule_batch.py::Req.init_next_round_input`` (``match_prefix`` over
``fill_ids[:len - 1]``), ``mem_cache/radix_cache.py::RadixCache.cache_unfinished_req`` /
``::cache_finished_req``, ``mem_cache/chunk_cache.py::ChunkCache`` (``--disable-radix-cache``)
and ``mem_cache/common.py::release_kv_cache``.

Paged (``--page-size`` P > 1): the tree cuts every key to whole pages (``radix.page_aligned``),
so a match, ``cache_protected_len`` and what a request leaves in the tree are multiples of P; the
request keeps its last partial page (``req.prefix_indices`` = the tree's pages + the partial tail,
as ``cache_unfinished_req`` writes it) and frees it when it is released.

A request's tokens are symbolic: token ``i`` of request ``r`` is ``(owner, i)``, where ``owner``
is the earliest request whose prompt agrees with ``r``'s on positions ``0..i`` (``Req.segments``,
built at arrival from ``Arrive.prefix_of`` / ``shared_len``); outputs are always the request's own.
Its EAGLE bigram key over ``n`` tokens has ``n - 1`` elements.

``init_next_round_input``, ``cache_unfinished_req`` and ``release_kv_cache`` are named operations
of :class:`specstate.model.ops.Ops` (first argument: the ops table).
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Hashable

from specstate.model.kv import free_slots, held_slots
from specstate.model.radix import ROOT, cache_finished, cache_unfinished, match_prefix
from specstate.model.request import Req
from specstate.model.state import ModelState

if TYPE_CHECKING:
    from specstate.model.ops_table import Ops

__all__ = ["bigram_key", "init_next_round_input", "cache_unfinished_req", "release_kv_cache"]


@lru_cache(maxsize=8192)
def bigram_key(segments: tuple[tuple[int, int], ...], n_tokens: int) -> tuple[Hashable, ...]:
    """The bigram key of a request's first ``n_tokens`` tokens (``RadixKey`` with ``is_bigram``)."""
    owners = _owners(segments, n_tokens)
    return tuple((owners[i], owners[i + 1], i) for i in range(n_tokens - 1))


def _owners(segments: tuple[tuple[int, int], ...], n: int) -> list[int]:
    out: list[int] = []
    for end, owner in segments:
        out.extend([owner] * (min(end, n) - len(out)))
        if len(out) >= n:
            break
    return out


def init_next_round_input(ops: "Ops", s: ModelState, req: Req) -> tuple[ModelState, Req]:
    """``Req.init_next_round_input(tree_cache)``: match ``fill_ids[:fill_len - 1]`` against the
    tree; ``prefix_indices`` = the match, ``last_node`` its end (not locked yet)."""
    if s.config.disable_radix_cache:
        return s, req.evolve(prefix_len=0, cache_protected_len=0, last_node=ROOT)
    n = max(req.fill_len - 1, 0)
    tree, matched, node = match_prefix(s.tree, bigram_key(req.segments, n))
    return s.evolve(tree=tree), req.evolve(prefix_len=matched, cache_protected_len=matched, last_node=node)


def cache_unfinished_req(ops: "Ops", s: ModelState, req: Req) -> tuple[ModelState, Req]:
    """``RadixCache.cache_unfinished_req``: insert what is prefilled so far (``fill_ids``, the
    ``kv_committed_len`` tokens), free the request's duplicates of what the tree already
    had, re-match and move the request's lock to the new end."""
    n = req.kv_committed_len
    if s.config.disable_radix_cache:
        # ChunkCache.cache_unfinished_req: prefix_indices = the request's own slots
        return s, req.evolve(prefix_len=n)
    tree, present, matched, node = cache_unfinished(s.tree, bigram_key(req.segments, n), req.last_node)
    s = free_slots(s, max(0, present - req.cache_protected_len))
    return s.evolve(tree=tree), req.evolve(cache_protected_len=matched, prefix_len=n, last_node=node)


def release_kv_cache(ops: "Ops", s: ModelState, req: Req, is_insert: bool = True) -> tuple[ModelState, Req]:
    """``mem_cache/common.py::release_kv_cache``: ``cache_finished_req`` (insert the committed
    tokens, or with ``is_insert=False`` (retraction) just give the request's own slots back),
    unlock, then free the over-allocated slots past ``kv_committed_len``. Paged: the key is cut
    to whole pages (``page_aligned``), the unaligned tail ``kv_indices[key_len:]`` and the
    over-allocation from ``ceil_align(kv_committed_len, page_size)`` free whole pages, so the
    request gives back every page it held (retraction frees whole pages)."""
    committed, page = req.kv_committed_len, s.config.page_size
    # PagedTokenToKVPoolAllocator.free frees the pages of the indices: the request's last partial
    # page goes with its tail, the over-allocation from ceil_align(kv_committed_len, page_size)
    allocated = held_slots(req.kv_allocated_len, 0, page)
    if s.config.disable_radix_cache:
        s = free_slots(s, allocated)
    else:
        key_len = max(committed - 1, 0) // page * page  # RadixKey(...).page_aligned(page_size)
        tree, present = cache_finished(s.tree, bigram_key(req.segments, committed) if is_insert else None, req.last_node)
        freed = max(0, (present if is_insert else key_len) - req.cache_protected_len)
        s = free_slots(s.evolve(tree=tree), freed + (committed - key_len) + (allocated - committed))
    return s, req.evolve(kv_allocated_len=0, kv_committed_len=0, draft_kv_len=0, prefix_len=0,
                         cache_protected_len=0, last_node=ROOT)
