"""The radix prefix cache, as far as it changes counts.

Owns: the tree of cached token sequences, each node's lock count and last access, the
``evictable`` / ``protected`` sizes. Mirrors ``sglang/srt/mem_cache/radix_cache.py::RadixCache``
(``match_prefix``, ``insert``, ``_split_node``, ``evict``, ``inc_lock_ref``, ``dec_lock_ref``,
``evictable_size``, ``protected_size``) and ``evict_policy.py::LRUStrategy``.

Keys are EAGLE *bigram* keys (``RadixKey.maybe_to_bigram_view`` with ``is_eagle``): a sequence of
``n`` tokens is the key of ``n - 1`` bigrams, and bigram ``i`` owns the KV slot of token ``i``.
Tokens are symbolic (``request.token``): two requests' token ``i`` are equal exactly when their
prompts agree on positions ``0..i``, which is all a tree matched from the root can observe.

Paged (``page_size`` P > 1, ``RadixCache`` with ``page_size``): every key is cut to a multiple of
P first (``RadixKey.page_aligned``), children are keyed by their first page (``RadixKey.child_key``)
and a match counts whole pages only (``RadixKey.match`` rounds down to P), so every node owns whole
pages and splits fall on page boundaries; eviction frees whole leaves, so whole pages. Page size 1
is the unpaged tree, unchanged.

Slots are counted, not named: a node of key length ``k`` owns ``k`` slots. Identity kept::

    evictable + protected == sum(len(node.key) for every node but the root)
    protected == sum(len(node.key) for nodes with lock_ref > 0)

Access times are a logical clock (one tick per ``match_prefix`` / ``insert`` call, as
``time.monotonic()`` is one reading per call); eviction pops the least recently used
evictable leaf first, ties broken by node id (sglang's set order is arbitrary there).

The tree is a frozen value (a tuple of node tuples, sorted by id, hashable); operations copy
it into a small ``_Work``, change it, and freeze it again. The copy is structural: the frozen
tree keeps an id -> node index and a children index beside its node tuple (bookkeeping, not
fields), ``_Work`` copies the two dictionaries (in C) and replaces only the nodes and child
tables it changes, so an operation costs the path it walks, not a Python loop over the tree.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Final, Hashable, Sequence

from specstate.model.values import cached_hash

__all__ = ["RadixTree", "EMPTY_TREE", "empty_tree", "page_aligned", "ROOT", "match_prefix", "insert", "inc_lock_ref", "dec_lock_ref", "evict",
           "cache_unfinished", "cache_finished"]

ROOT = 0

# (id, parent, key, lock_ref, last_access)
_Node = tuple[int, int, tuple[Hashable, ...], int, int]
#: ``Final``: the checker reads each as its literal, so ``node[_KEY]`` has the key's type, not the union
_PARENT: Final = 1
_KEY: Final = 2
_LOCK: Final = 3
_ACCESS: Final = 4


@cached_hash
@dataclass(frozen=True)
class RadixTree:
    nodes: tuple[_Node, ...] = ((ROOT, -1, (), 1, 0),)  #: sorted by id; the root's lock_ref is 1
    next_id: int = 1
    clock: int = 0
    evictable: int = 0  #: ``RadixCache.evictable_size_``
    protected: int = 0  #: ``RadixCache.protected_size_``
    #: ``RadixCache.page_size``; not compared or hashed (every tree of a run has its config's page size,
    #: ``ModelState.config`` compares it), so equality and hashing cost what they did unpaged
    page_size: int = field(default=1, compare=False)
    __evolve_drop__ = ("_by_id", "_kids")  #: the indexes describe these nodes only

    @property
    def total(self) -> int:
        """``RadixCache.total_size``: slots the tree owns."""
        return self.evictable + self.protected

    def lock_ref(self, node: int) -> int:
        return self._index()[node][_LOCK]

    def _index(self) -> dict[int, _Node]:
        """id -> node, in id order (kept by ``_Work.freeze``, else built once)."""
        d = self.__dict__
        if "_by_id" not in d:
            d["_by_id"] = {n[0]: n for n in self.nodes}
        return d["_by_id"]

    def _children(self) -> dict[int, dict[Hashable, int]]:
        """id -> {first key element (paged: first page): child id}; inner tables are never
        changed in place."""
        d = self.__dict__
        if "_kids" not in d:
            kids: dict[int, dict[Hashable, int]] = {i: {} for i in self._index()}
            page = self.page_size
            for i, n in self._index().items():
                if n[_PARENT] >= 0:
                    kids[n[_PARENT]][_child_key(n[_KEY], 0, page)] = i
            d["_kids"] = kids
        return d["_kids"]


EMPTY_TREE = RadixTree()


def empty_tree(page_size: int) -> RadixTree:
    """An empty tree of ``page_size`` (``EMPTY_TREE`` at page size 1)."""
    return EMPTY_TREE if page_size == 1 else RadixTree(page_size=page_size)


def _child_key(key: Sequence[Hashable], start: int, page: int) -> Hashable:
    """``RadixKey.child_key(page_size)``: the element at ``start``, paged the page from ``start``."""
    return key[start] if page == 1 else tuple(key[start:start + page])


def page_aligned(key: tuple[Hashable, ...], page: int) -> tuple[Hashable, ...]:
    """``RadixKey.page_aligned``: ``key`` cut to a multiple of ``page`` elements."""
    return key if page == 1 else key[: len(key) // page * page]


class _Work:
    """A copy of one tree for the duration of one operation (copy-on-write per node)."""

    def __init__(self, t: RadixTree) -> None:
        self.nodes: dict[int, _Node] = dict(t._index())
        self.children: dict[int, dict[Hashable, int]] = dict(t._children())
        self._own: set[int] = set()  #: child tables already copied
        self.next_id, self.clock = t.next_id, t.clock
        self.evictable, self.protected = t.evictable, t.protected
        self.page = t.page_size

    def freeze(self) -> RadixTree:
        t = RadixTree(tuple(self.nodes.values()), self.next_id, self.clock, self.evictable, self.protected, self.page)
        t.__dict__["_by_id"], t.__dict__["_kids"] = self.nodes, self.children
        return t

    def set(self, i: int, pos: int, value: object) -> None:
        n = self.nodes[i]
        self.nodes[i] = n[:pos] + (value,) + n[pos + 1:]  # type: ignore[assignment]

    def kids(self, i: int) -> dict[Hashable, int]:
        """``i``'s child table, copied before its first change."""
        if i not in self._own:
            self.children[i] = dict(self.children[i])
            self._own.add(i)
        return self.children[i]

    def tick(self) -> int:
        self.clock += 1
        return self.clock

    def new_node(self, parent: int, key: tuple[Hashable, ...], lock: int, t: int) -> int:
        i = self.next_id
        self.next_id += 1
        self.nodes[i] = (i, parent, key, lock, t)
        self.children[i] = {}
        self._own.add(i)
        self.kids(parent)[_child_key(key, 0, self.page)] = i
        return i

    def split(self, child: int, at: int) -> int:
        """``RadixCache._split_node``: a new node over the first ``at`` key elements."""
        c = self.nodes[child]
        parent, key, lock = c[_PARENT], c[_KEY], c[_LOCK]
        new = self.new_node(parent, key[:at], lock, self.clock)
        self.nodes[child] = (c[0], new, key[at:], c[_LOCK], c[_ACCESS])
        self.kids(new)[_child_key(key, at, self.page)] = child
        return new

    def is_evictable_leaf(self, i: int) -> bool:
        return i != ROOT and self.nodes[i][_LOCK] == 0 and not self.children[i]


def _common(a: Sequence[Hashable], b: Sequence[Hashable], start: int = 0, page: int = 1) -> int:
    """The length of the common prefix of ``a`` and ``b[start:]`` (slices compared in C:
    whole, then by halving the mismatching range); paged, rounded down to whole pages
    (``RadixKey.match(page_size)``)."""
    if page > 1:
        n = _common(a, b, start)
        return n - n % page
    n = min(len(a), len(b) - start)
    if a[:n] == b[start: start + n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[start:start+lo]; a[:hi] differs
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[start + lo: start + mid]:
            lo = mid
        else:
            hi = mid
    return lo


def match_prefix(t: RadixTree, key: tuple[Hashable, ...]) -> tuple[RadixTree, int, int]:
    """``RadixCache.match_prefix``: (tree, matched length, last node). Refreshes access times
    along the path and splits a node where the match ends inside it. Paged, the key is cut to
    whole pages first (an empty cut key matches nothing and touches nothing)."""
    key = page_aligned(key, t.page_size)
    if not key:
        return t, 0, ROOT
    w = _Work(t)
    matched, node = _match(w, key)
    return w.freeze(), matched, node


def _match(w: _Work, key: tuple[Hashable, ...]) -> tuple[int, int]:
    now = w.tick()
    w.set(ROOT, _ACCESS, now)
    node, matched, page = ROOT, 0, w.page
    while matched < len(key) and _child_key(key, matched, page) in w.children[node]:
        child = w.children[node][_child_key(key, matched, page)]
        w.set(child, _ACCESS, now)
        n = _common(w.nodes[child][_KEY], key, matched, page)
        if n < len(w.nodes[child][_KEY]):
            node = w.split(child, n)
            matched += n
            break
        node, matched = child, matched + n
    return matched, node


def insert(t: RadixTree, key: tuple[Hashable, ...]) -> tuple[RadixTree, int]:
    """``RadixCache.insert`` (``_insert_helper``): returns (tree, length already present); the
    key cut to whole pages first."""
    key = page_aligned(key, t.page_size)
    w = _Work(t)
    done = _insert(w, key)
    return w.freeze(), done


def _insert(w: _Work, key: tuple[Hashable, ...]) -> int:
    now = w.tick()
    w.set(ROOT, _ACCESS, now)
    node, done, page = ROOT, 0, w.page
    while done < len(key) and _child_key(key, done, page) in w.children[node]:
        child = w.children[node][_child_key(key, done, page)]
        w.set(child, _ACCESS, now)
        n = _common(w.nodes[child][_KEY], key, done, page)
        done += n
        node = w.split(child, n) if n < len(w.nodes[child][_KEY]) else child
    if done < len(key):
        w.new_node(node, key[done:], 0, now)
        w.evictable += len(key) - done
    return done


def _path(w: _Work, node: int) -> list[int]:
    out = []
    while node != ROOT and node >= 0:
        out.append(node)
        node = w.nodes[node][_PARENT]
    return out


def inc_lock_ref(t: RadixTree, node: int) -> RadixTree:
    """``RadixCache.inc_lock_ref``: lock the path from ``node`` to the root."""
    return _locked(t, node, +1)


def dec_lock_ref(t: RadixTree, node: int) -> RadixTree:
    """``RadixCache.dec_lock_ref``."""
    return _locked(t, node, -1)


def _locked(t: RadixTree, node: int, by: int) -> RadixTree:
    if node == ROOT:
        return t
    w = _Work(t)
    _lock(w, node, by)
    return w.freeze()


def _lock(w: _Work, node: int, by: int) -> None:
    """``inc_lock_ref`` (``by`` = 1) / ``dec_lock_ref`` (-1) on the path from ``node`` to the root."""
    unlocked = 0 if by > 0 else 1  # the lock count at which a node moves between evictable and protected
    for i in _path(w, node):
        n = w.nodes[i]
        if n[_LOCK] == unlocked:
            w.evictable -= by * len(n[_KEY])
            w.protected += by * len(n[_KEY])
        w.set(i, _LOCK, n[_LOCK] + by)


def cache_unfinished(t: RadixTree, key: tuple[Hashable, ...], locked: int) -> tuple[RadixTree, int, int, int]:
    """``RadixCache.cache_unfinished_req``'s tree part in one copy: ``insert(key)``, then
    ``match_prefix(key)``, ``dec_lock_ref(locked)``, ``inc_lock_ref(new end)``. Returns (tree,
    length already present before the insert, matched length, the node now locked). The key is
    cut to whole pages (``RadixKey(...).page_aligned(page_size)``)."""
    key = page_aligned(key, t.page_size)
    w = _Work(t)
    present = _insert(w, key)
    matched, node = _match(w, key) if key else (0, ROOT)
    if locked != ROOT:
        _lock(w, locked, -1)
    if node != ROOT:
        _lock(w, node, +1)
    return w.freeze(), present, matched, node


def cache_finished(t: RadixTree, key: tuple[Hashable, ...] | None, locked: int) -> tuple[RadixTree, int]:
    """``RadixCache.cache_finished_req``'s tree part in one copy: ``insert(key)`` (none when
    ``key`` is ``None``), then ``dec_lock_ref(locked)``. Returns (tree, length already present)."""
    if key is None and locked == ROOT:
        return t, 0
    if key is not None:
        key = page_aligned(key, t.page_size)
    w = _Work(t)
    present = _insert(w, key) if key is not None else 0
    if locked != ROOT:
        _lock(w, locked, -1)
    return w.freeze(), present


def evict(t: RadixTree, num_tokens: int) -> tuple[RadixTree, int]:
    """``RadixCache.evict`` (LRU): free whole evictable leaves, oldest first, until at least
    ``num_tokens`` slots are freed or none is left. Returns (tree, slots freed)."""
    if num_tokens <= 0 or t.evictable == 0:
        return t, 0
    w = _Work(t)
    heap = [(w.nodes[i][_ACCESS], i) for i in w.nodes if w.is_evictable_leaf(i)]
    heapq.heapify(heap)
    freed = 0
    while freed < num_tokens and heap:
        _, i = heapq.heappop(heap)
        n = w.nodes.pop(i)
        parent = n[_PARENT]
        del w.children[i]
        del w.kids(parent)[_child_key(n[_KEY], 0, w.page)]
        freed += len(n[_KEY])
        w.evictable -= len(n[_KEY])
        if w.is_evictable_leaf(parent):
            heapq.heappush(heap, (w.nodes[parent][_ACCESS], parent))
    return w.freeze(), freed
