"""The behaviour digest (``benchmarks/digest.py``): the speed work changed nothing observable.

``MAIN_TINY_DIGEST`` was computed on main before the speed work (commit 7c8499d, which has issue 12's
intended v2 change; 4b6c9e0 before it gave another value, see ``benchmarks/digest.py``); any change to
a state, forward, event, crash, violation or explored graph of the tiny set changes the hash.
The full and ``--quick`` digests are ``python -m benchmarks.digest [--quick]``.
"""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from benchmarks.digest import MAIN_TINY_DIGEST, digest_parts, state_view
from specstate.check import Run
from specstate.model import Arrive, Step
from specstate.model.values import evolve
from specstate.scenarios import SMALL


@pytest.mark.slow  # 11 CPU s: every built-in variant's steps hashed; after a change to the model, run it
def test_tiny_digest_is_mains() -> None:
    assert digest_parts(tiny=True)["total"] == MAIN_TINY_DIGEST


def _some_state():  # type: ignore[no-untyped-def]
    run = Run(SMALL, "fixed-threshold")
    for a in (Arrive(5, 4), Arrive(3, 2), Step(), Step(accept=(3, 3)), Step()):
        run.apply(a)
    return run.state


def test_evolve_is_replace() -> None:
    s = _some_state()
    for obj, change in ((s, {"kv_available": 3}), (s.req(0), {"output_len": 9}), (s.running, {"rids": (1,)})):
        fast, slow = evolve(obj, **change), dataclasses.replace(obj, **change)
        assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
        assert state_view(fast) == state_view(slow) != state_view(obj)


def test_evolve_rejects_unknown_fields() -> None:
    s = _some_state()
    try:
        evolve(s.req(0), outptu_len=1)
    except TypeError as e:
        assert "outptu_len" in str(e)
    else:
        raise AssertionError("evolve accepted a field the class does not have")


def test_cached_hash_is_the_field_hash_and_is_not_pickled() -> None:
    s = _some_state()
    h = hash(s)
    assert s.__dict__["_hash"] == h == hash(dataclasses.replace(s))
    back = pickle.loads(pickle.dumps(s))
    assert "_hash" not in back.__dict__ and back == s and hash(back) == h


def test_live_index_follows_the_requests() -> None:
    s = _some_state()
    assert s.live_rids() == tuple(r.rid for r in s.reqs if r.live)
    done = s.with_reqs([s.req(0).evolve(status=type(s.req(0).status).FINISHED)])
    assert done.live_rids() == tuple(r.rid for r in done.reqs if r.live) and 0 not in done.live_rids()
