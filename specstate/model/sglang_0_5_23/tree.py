"""What sglang 0.5.23's tree insert adds to 0.5.17's: the split at the prompt boundary.

Owns nothing; replaces the 0.5.17 family's ``cache_unfinished_req`` and wraps the tree half of
its ``release_kv_cache`` (``finish.py``). sglang 0.5.23's ``mem_cache/radix_cache.py::RadixCache.checkpoint``
(and ``mem_cache/unified_radix_cache.py::UnifiedRadixCache.checkpoint_into_tree``, the default tree
the oracle runs) inserts the request's key, then inserts the key of its prompt alone
(``mem_cache/radix_cache.py::RadixCache._insert_cache`` with ``split_prompt=True``: "Split the leaf
at the prompt boundary so eviction can drop the output KV without the prompt"), when that key is
non-empty and shorter than the inserted one. The second insert adds no slot (the prompt is a
prefix of what was just inserted); it only splits the node that spans the boundary, so a later
eviction of a few slots takes the output part and keeps the prompt (one node where 0.5.17 kept
one leaf over both).

A request's prompt and output never share a node in the model but one way: a retracted request
re-prefills ``prompt + output`` (``Req.fill_ids``) and its checkpoint inserts both as one node
(a request prefilled from its prompt alone had the prompt inserted first, so the boundary is
already a node boundary). Found by the CPU oracle (docs/oracle.md, "sglang 0.5.23").

First releases (the AST of each): 0.5.20 splits in ``RadixCache.cache_finished_req``; 0.5.21 in
``insert_req`` (the finished path); 0.5.22 in ``checkpoint``, finished and unfinished alike.

Order: upstream inserts the key, the prompt key, then (unfinished) re-matches the key. Here the
prompt key is inserted after 0.5.17's insert and re-match; that stamps the prompt's path one
logical tick later than the rest of the request's path, and nothing is stamped in between, so
no eviction order can tell the two apart (those nodes are the ancestors of the leaf just stamped).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specstate.model.prefix_cache import bigram_key, cache_unfinished_req
from specstate.model.radix import insert
from specstate.model.request import Req

if TYPE_CHECKING:
    from specstate.model.ops_table import Ops
    from specstate.model.state import ModelState

__all__ = ["split_at_prompt", "cache_unfinished_req_v23"]


def split_at_prompt(s: "ModelState", req: Req, n_tokens: int) -> "ModelState":
    """``RadixCache._insert_cache``'s ``split_prompt``: after inserting the key of the request's
    first ``n_tokens`` tokens, insert the key of its prompt when ``0 < len(prompt_key) < len(key)``
    (bigram keys: one shorter than the tokens they span; both ``page_aligned``: paged, the lengths
    compared are whole pages, and the prompt key inserted is cut to pages by ``insert``)."""
    page = s.config.page_size
    if s.config.disable_radix_cache or not 0 < (req.prompt_len - 1) // page * page < (n_tokens - 1) // page * page:
        return s
    tree, _present = insert(s.tree, bigram_key(req.segments, req.prompt_len))
    return s.evolve(tree=tree)


def cache_unfinished_req_v23(ops: "Ops", s: "ModelState", req: Req) -> tuple["ModelState", Req]:
    """The operation ``cache_unfinished_req`` of 0.5.22+: ``mem_cache/common.py::checkpoint_kv_cache``
    -> ``RadixCache.checkpoint`` up to ``kv_committed_len``: 0.5.17's insert and re-match, then the
    split at the prompt boundary."""
    s, out = cache_unfinished_req(ops, s, req)
    return split_at_prompt(s, req, req.kv_committed_len), out
