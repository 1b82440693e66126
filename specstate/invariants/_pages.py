"""The KV page invariants (``--page-size`` P > 1): what sglang's own checker asserts about pages.

Upstream's scheduler invariant checker (from 0.5.17 on: ``SchedulerInvariantChecker`` in
``managers/scheduler_components/invariant_checker.py``; 0.5.12 has the pool check of
``scheduler_runtime_checker_mixin.py::SchedulerRuntimeCheckerMixin._check_all_pools``) checks, while
busy, that a request's private KV is ``ceil_align(kv_allocated_len, page_size) - cache_protected_len``
with ``cache_protected_len % page_size == 0`` (its ``_get_total_uncached_sizes`` and
``kv_private_tokens`` in ``pool_stats_observer.py``), that free + evictable + protected + private ==
the pool (its ``_check_full_pool``), and with ``SGLANG_CHECK_KV_PAGE_INVARIANTS`` (its
``_check_kv_page_invariants``) ``0 <= kv_committed_len <= kv_allocated_len <= row_width`` for every
owner, no owner page in the free pool and no page freed twice. Cited in 0.5.12's terms below
(the checker's names are 0.5.17's, written without the ``file::symbol`` form). The model counts slots, so the three
below say it in counts: each page has one owner (the tree or one request, never split), the
pages add up, and a request's positions lie in its pages and in its ``req_to_token`` row.

At page size 1 every check is trivially true and each returns at once (the unpaged verdicts and
the cost of a step are unchanged).
"""

from __future__ import annotations

from typing import Iterator

from specstate.invariants._core import Violation, invariant
from specstate.model.kv import ceil_align, held_slots
from specstate.model.step import StepOutcome

__all__: list[str] = []


def _v(o: StepOutcome, name: str, field: str, expected: object, actual: object, rid: int | None = None,
       detail: str = "") -> Violation:
    return Violation(name, o.state.step_index, rid, field, expected, actual, detail, {})


@invariant("kv-pages-owned-once",
           "mem_cache/radix_cache.py::RadixKey.page_aligned; radix_cache.py::RadixCache.cache_unfinished_req "
           "(cache_protected_len = the page-aligned match; the scheduler's runtime checker asserts it % page_size "
           "== 0: SchedulerRuntimeCheckerMixin, the overlap releases' SchedulerInvariantChecker)")
def kv_pages_owned_once(o: StepOutcome) -> Iterator[Violation]:
    """No page is owned twice: every radix node holds whole pages (``RadixKey.page_aligned`` before
    every insert, splits at page boundaries), and every request's own pages start where the tree's
    end (``cache_protected_len`` a multiple of the page size), so no page is split between the tree
    and a request or between two nodes."""
    s = o.state
    page = s.config.page_size
    if page == 1:
        return
    if s.tree is not o.before.tree:
        for node in s.tree.nodes:
            if len(node[2]) % page:
                yield _v(o, "kv-pages-owned-once", f"tree_cache.node[{node[0]}].key", f"a multiple of {page} tokens",
                         len(node[2]), detail="a radix node holds part of a page")
                break
    for r in s.live_reqs():
        if r.kv_allocated_len and r.cache_protected_len % page:
            yield _v(o, "kv-pages-owned-once", "req.cache_protected_len", f"a multiple of {page}",
                     r.cache_protected_len, r.rid, detail="the request's first own page is also the tree's")


@invariant("kv-pages-conserved",
           "mem_cache/allocator.py::PagedTokenToKVPoolAllocator (available_size = len(free_pages) * page_size); "
           "scheduler_runtime_checker_mixin.py::SchedulerRuntimeCheckerMixin._check_all_pools")
def kv_pages_conserved(o: StepOutcome) -> Iterator[Violation]:
    """Free pages are conserved: the free, cached (tree) and held (requests' private) counts are
    whole pages, and free + cached + held == the pool's pages."""
    s = o.state
    page = s.config.page_size
    if page == 1:
        return
    held = sum(held_slots(r.kv_allocated_len, r.cache_protected_len, page) for r in s.live_reqs())
    counts = {"token_to_kv_pool_allocator.available_size": s.kv_available, "tree_cache.total_size": s.tree.total,
              "requests' private tokens": held}
    for field, value in counts.items():
        if value % page:
            yield _v(o, "kv-pages-conserved", field, f"a multiple of page_size {page}", value,
                     detail=f"{value % page} slots of a page unaccounted")
            return
    pages = s.config.kv_pool_size // page
    if s.kv_available // page + s.tree.total // page + held // page != pages:
        yield _v(o, "kv-pages-conserved", "free + cached + held pages", pages,
                 s.kv_available // page + s.tree.total // page + held // page,
                 detail=f"free {s.kv_available // page}, cached {s.tree.total // page}, held {held // page}")


@invariant("kv-pages-request-slots",
           "model_runner_kv_cache_mixin.py::ModelRunnerKVCacheMixin._init_pools (the row width); "
           "spec_utils.py::assign_draft_cache_locs (writes req_to_token[seq_len:seq_len + extend_len]); "
           "the overlap releases' SchedulerInvariantChecker._check_kv_page_invariants: "
           "0 <= kv_committed_len <= kv_allocated_len <= row_width")
def kv_pages_request_slots(o: StepOutcome) -> Iterator[Violation]:
    """A request's slots are exactly its pages' slots: its KV positions ``[0, kv_committed_len)``
    lie within what it allocated (the pages it holds), and within its ``req_to_token`` row
    (``context_len + 4 + num_draft_tokens`` columns; under the overlap worker at least the decode
    reservation + ``page_size - 1``: ``SpecConfig.req_to_token_row_width``); so do the positions a draft writes for it
    (topk > 1 duplicates the last partial page per branch: the row extends to
    ``seq_len // P * P + ceil((seq_len % P + num_steps) / P) * P * topk``)."""
    s = o.state
    cfg = s.config
    page = cfg.page_size
    if page == 1:
        return
    width = cfg.req_to_token_row_width
    for r in s.live_reqs():
        if r.kv_allocated_len and not r.kv_committed_len <= r.kv_allocated_len <= width:
            yield _v(o, "kv-pages-request-slots", "req.kv_allocated_len",
                     f"kv_committed_len {r.kv_committed_len} <= allocated <= row width {width}", r.kv_allocated_len,
                     r.rid, detail="committed KV outside the request's pages" if r.kv_committed_len > r.kv_allocated_len
                     else "past its req_to_token row")
    steps, topk = cfg.speculative_num_steps, cfg.speculative_eagle_topk
    for f in o.forwards:
        if f.phase != "draft" or topk == 1:
            continue
        for rid, seq in zip(f.rids, f.draft_kv_lens):
            end = seq // page * page + ceil_align(seq % page + steps, page) * topk
            if end > width:
                yield _v(o, "kv-pages-request-slots", "draft req_to_token end", f"<= row width {width}", end, rid,
                         detail=f"the draft's paged layout (seq_len {seq}, topk {topk}) writes past the row")
                return
