"""Each v2 known-bug variant (``specstate.model.sglang_0_5_17.variants``) fails its scripted story on the
invariant we expect, at the step we expect; upstream 0.5.17 passes the same story."""

from __future__ import annotations

import pytest

from specstate.cli import run_scenario
from specstate.model import get_variant
from specstate.model.sglang_0_5_17.variants import V2_KNOWN_BUGS

CASES = [
    # (variant, invariant, step, request, field)
    # steps 0 reserved committed + 2; back at 3 steps the draft writes 3 slots past the bonus
    ("v2-alloc-follows-active-steps", "kv-accounting", 17, 1, "draft.kv_write_end"),
    # after the downswitch kv_allocated_len shrinks to committed + 2: 18 slots nobody owns
    ("v2-downswitch-unclamped", "kv-accounting", 9, None, "token_to_kv_pool_allocator.allocated"),
    # committed + 4 reserved, the device is 2 ahead: the draft writes to 13 > 12
    ("v2-single-reserve", "kv-accounting", 4, 0, "draft.kv_write_end"),
    # 12 steps with steps 0 and no draft extend: the draft KV stays at the prompt (8)
    ("v2-skip-zero-step-draft-extend", "draft-kv-in-step", 17, 1, "draft_kv_len"),
    # request 0 finished (3 tokens) while its next decode was in flight; that result commits 4
    ("v2-commit-after-finish", "kv-accounting", 6, 0, "req.kv_committed_len"),
    # 7 steps from chain buffers built for 3: 12 entries for a 3 x 8 tree
    ("v2-chain-buffers-not-rebuilt", "worker-crash", 5, None, "eagle_utils.py::build_tree_kernel_efficient"),
]


def test_every_v2_known_bug_has_a_case() -> None:
    assert {v.name for v in V2_KNOWN_BUGS} == {c[0] for c in CASES}
    assert all(v.reference and v.family_name == "sglang-0.5.17" for v in V2_KNOWN_BUGS)


@pytest.mark.parametrize("variant,invariant,step,rid,field", CASES)
def test_v2_known_bug_is_caught(variant: str, invariant: str, step: int, rid: int | None, field: str) -> None:
    assert get_variant(variant).expected_invariant == invariant
    r = run_scenario(f"bug:{variant}", variant, 0)
    v = r.first
    assert v is not None, f"{variant} was not caught"
    assert (v.invariant, v.step, v.rid, v.field) == (invariant, step, rid, field), v.describe()
    assert v.expected != v.actual


#: stories whose config sglang 0.5.17 cannot start (``model/sglang_0_5_17/start.py``): the bug needs a candidate
#: above the startup step count, which 0.5.17 refuses at start
REFUSED_AT_START = {"v2-chain-buffers-not-rebuilt"}


@pytest.mark.parametrize("variant", [c[0] for c in CASES if c[0] not in REFUSED_AT_START])
def test_upstream_passes_the_same_story(variant: str) -> None:
    r = run_scenario(f"bug:{variant}", "upstream-adaptive", 0)
    assert r.ok, r.first.describe()  # type: ignore[union-attr]


@pytest.mark.parametrize("variant", sorted(REFUSED_AT_START))
def test_upstream_refuses_the_story_at_engine_start(variant: str) -> None:
    from specstate.model.sglang_0_5_17.start import EngineStartRefused

    with pytest.raises(EngineStartRefused, match=r"--speculative-num-steps=3 is not in the adaptive config "
                                                 r"candidate_steps \[7\]") as e:
        run_scenario(f"bug:{variant}", "upstream-adaptive", 0)
    assert e.value.upstream == "ValueError" and e.value.where.endswith("::_init_adaptive_speculative_params")
