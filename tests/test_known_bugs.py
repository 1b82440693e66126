"""Each known-bug variant of every release fails its scripted story (``bug:NAME``) on the
invariant we expect, at the step we expect; the corrected variant it derives from (its ``base``, the
family's default: ``fixed-threshold`` for 0.5.12, ``upstream-adaptive`` for 0.5.17) passes the same
story, or refuses it at engine start where upstream does. One table for every release (a new
release's known bugs add rows, not a file), checked against the variant and family registries.
Below the table, regressions of the 0.5.12 model."""

from __future__ import annotations

import re
from typing import NamedTuple

import pytest

from specstate.cli import run_scenario
from specstate.errors import InvalidConfig
from specstate.model import get_variant
from specstate.model.families import family_names, get_family
from specstate.model.variants import variant_names
from specstate.scenarios import SCENARIOS


class Refusal(NamedTuple):
    """The corrected base's engine start refuses the story's config (the family's ``start``)."""

    upstream: str  #: the exception class upstream raises
    where: str  #: the tail of where it raises
    message: str  #: a regular expression of the refusal's text


#: sglang 0.5.17 cannot start the story's config: the bug needs a candidate above the startup step
#: count, which 0.5.17 refuses at start (``model/sglang_0_5_17/start.py``)
ADAPTIVE_REFUSAL = Refusal("ValueError", "::_init_adaptive_speculative_params",
                           r"--speculative-num-steps=3 is not in the adaptive config candidate_steps \[7\]")

CASES = [
    # (variant, invariant, step, request, field[, the base's refusal at start])
    # -- sglang 0.5.12 (``model/sglang_0_5_12/known_bugs.py``)
    # request 0 finished outside verify (abort): its topk_p row stays, the filter truncates
    ("finish-before-filter", "spec-info-rows", 5, None, "spec_info.rows"),
    # 8 prompt tokens + 1 running row, but 3 accepted slots reused: 11 locations for 9 tokens
    ("mixed-reuses-spec-loc", "token-counts", 5, None, "forward_target_extend.out_cache_loc"),
    # 4 draft tokens, 2 accepted then finished: the 2 rejected slots are never freed
    ("kv-leak-spec-tail", "kv-accounting", 3, None, "token_to_kv_pool_allocator.allocated"),
    # 3 steps with speculation off; request 1 resumes drafting with its draft KV 3 tokens behind
    ("draft-kv-stale-on-resume", "draft-kv-in-step", 8, 1, "draft_kv_len"),
    # decode rows {0, 1} unchanged, a queued prefill row flips the decision
    ("switch-thrash", "stable-switch-decision", 6, None, "speculate"),
    # bs 4 replays, request 0 finishes, bs 3 replays under captured size 4: row 3 is request 3's
    ("stale-graph-padding", "graph-padding", 7, 3, "draft.draft_decode.seq_lens[3]"),
    # the chunked request is selected out of the prefill's draft input; accept_length keeps 2 rows
    ("unfiltered-accept-length", "spec-info-rows", 4, None, "spec_info.accept_length"),
    # -- sglang 0.5.17 (``model/sglang_0_5_17/variants.py``)
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
    ("v2-chain-buffers-not-rebuilt", "worker-crash", 5, None, "eagle_utils.py::build_tree_kernel_efficient",
     ADAPTIVE_REFUSAL),
]
CAUGHT = [c[:5] for c in CASES]
REFUSED = {c[0]: c[5] for c in CASES if len(c) > 5}


def _known_bugs(family: str) -> set[str]:
    """The family's known-bug variants: its registered variants with a scripted story ``bug:NAME``."""
    return {n for n in variant_names() if f"bug:{n}" in SCENARIOS and get_variant(n).family_name == family}


@pytest.mark.parametrize("family", family_names())
def test_every_known_bug_has_a_case(family: str) -> None:
    rows = {c[0] for c in CASES if get_variant(c[0]).family_name == family}
    assert _known_bugs(family) == rows
    assert all(get_variant(n).reference and not get_variant(n).correct for n in rows)


def test_every_case_is_a_known_bug_of_a_registered_release() -> None:
    assert {c[0] for c in CASES} == set().union(*(_known_bugs(f) for f in family_names()))
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("variant,invariant,step,rid,field", CAUGHT)
def test_known_bug_is_caught(variant: str, invariant: str, step: int, rid: int | None, field: str) -> None:
    assert get_variant(variant).expected_invariant == invariant
    r = run_scenario(f"bug:{variant}", variant, 0)
    v = r.first
    assert v is not None, f"{variant} was not caught"
    assert (v.invariant, v.step, v.rid, v.field) == (invariant, step, rid, field), v.describe()
    assert v.expected != v.actual


def _corrected(variant: str) -> str:
    """The variant the bug is a slip of: its ``base``, else its family's default."""
    v = get_variant(variant)
    return v.base or get_family(v.family_name).default_variant


@pytest.mark.parametrize("variant", [c[0] for c in CASES if c[0] not in REFUSED])
def test_the_corrected_base_passes_the_same_story(variant: str) -> None:
    assert _corrected(variant) == get_family(get_variant(variant).family_name).default_variant
    r = run_scenario(f"bug:{variant}", _corrected(variant), 0)
    assert r.ok, r.first.describe()  # type: ignore[union-attr]


@pytest.mark.parametrize("variant", sorted(REFUSED))
def test_the_corrected_base_refuses_the_story_at_engine_start(variant: str) -> None:
    refusal = REFUSED[variant]
    with pytest.raises(InvalidConfig, match=refusal.message) as e:
        run_scenario(f"bug:{variant}", _corrected(variant), 0)
    assert getattr(e.value, "upstream", None) == refusal.upstream
    assert str(getattr(e.value, "where", "")).endswith(refusal.where)
    assert re.search(refusal.message, str(e.value))


def test_mixing_done_right_passes() -> None:
    """The corrected ``mix_with_running`` (one new slot per running request) with mixing on."""
    import random

    from specstate.check import Run
    from specstate.model import Variant
    from specstate.scenarios import get_scenario

    sc = get_scenario("bug:mixed-reuses-spec-loc")
    run = Run(sc.config, Variant("mixed-right", "mixing on, default mix_with_running", base="fixed-threshold",
                                 config_changes={"enable_mixed_chunk": True}))
    sc.play(run, random.Random(0))
    r = run.result()
    assert r.ok, r.first.describe()  # type: ignore[union-attr]
    assert any(a for a in r.actions)  # the story ran to its end
    assert run.state.reqs[1].output_len == 1  # the mixed-in prefill produced its first token


def test_seed_bug_alias() -> None:
    assert get_variant("seed-stale-spec-info") is get_variant("naive-threshold")


def test_retract_aborts_the_last_request_when_even_it_does_not_fit() -> None:
    """Regression (found by random runs): the aborted last request must end FINISHED, not
    stay RUNNING with its KV released."""
    from specstate.check import run_actions
    from specstate.model import Arrive, FinishReason, ReqStatus, SpecConfig, Step

    # sglang clamps max_new_tokens so that prompt + max_new fits the pool, but a decode step
    # needs max(steps * topk, draft tokens) = 16 free slots: near the end even one request
    # alone does not fit, and retract_decode aborts it
    cfg = SpecConfig().with_(target_kv_pool_size=64, draft_kv_pool_size=64, max_running_requests=1)
    r = run_actions(cfg, "fixed-threshold", [Arrive(20, 40)] + [Step(accept=(1,))] * 40)
    assert r.ok, r.first.describe()  # type: ignore[union-attr]
    from specstate.check import Run
    run = Run(cfg, "fixed-threshold")
    for a in r.actions:
        run.apply(a)
    req = run.state.reqs[0]
    assert req.status == ReqStatus.FINISHED and req.finish_reason == FinishReason.ABORT
    assert 0 < req.output_len < 40
    assert run.state.kv_allocated == run.state.tree.total  # only the radix tree holds slots


def test_mixing_skips_requests_that_finished_in_the_last_decode() -> None:
    """Regression (found by random runs): ``get_new_batch_prefill`` filters the running
    batch before ``mix_with_running``; a request that finished at the last decode must not
    be mixed in again."""
    from specstate.check import run_actions
    from specstate.model import Arrive, Step, Variant
    from specstate.scenarios import SMALL

    mixing = Variant("mixed-right", "mixing on", base="fixed-threshold", config_changes={"enable_mixed_chunk": True})
    actions = [Arrive(8, 20), Arrive(8, 20), Step(), Step(eos=(0,)), Arrive(8, 20), Step(), Step()]
    r = run_actions(SMALL, mixing, actions)
    assert r.ok, r.first.describe()  # type: ignore[union-attr]
    assert r.steps == len(actions)


def test_a_prompt_longer_than_the_pool_is_prefilled_as_one_token_and_aborted() -> None:
    """``validate_input_length`` (``len(prompt) >= max_req_len - 5``) then ``set_finish_with_abort``:
    the prompt becomes one token, it is queued, prefilled (one slot) and finishes with
    ``FINISH_ABORT`` at that prefill; the short one behind it is not blocked."""
    from specstate.check import Run
    from specstate.model import Arrive, FinishReason, ReqStatus, Step
    from specstate.scenarios import SMALL

    cfg = SMALL.with_(target_kv_pool_size=16, draft_kv_pool_size=16)
    run = Run(cfg, "fixed-threshold")
    for a in (Arrive(24, 8), Arrive(3, 2)):
        run.apply(a)
    assert run.state.reqs[0].prompt_len == 1 and run.state.waiting == (0, 1)
    run.apply(Step())
    assert run.state.last_batch is not None and run.state.last_batch.extend_lens == (1, 3)
    for a in (Step(), Step()):
        run.apply(a)
    assert (run.state.reqs[0].status, run.state.reqs[0].finish_reason) == (ReqStatus.FINISHED, FinishReason.ABORT)
    assert run.state.reqs[0].output_len == 1 and run.state.reqs[0].kv_allocated_len == 0
    assert run.state.reqs[1].status == ReqStatus.FINISHED  # the short one was not blocked


def test_a_prompt_of_the_context_length_never_reaches_the_scheduler() -> None:
    """``TokenizerManager._validate_one_request``: ``len(input_ids) >= context_len`` is refused
    before the scheduler (a ``ValueError`` to the client): never queued, never prefilled."""
    from specstate.check import Run
    from specstate.model import Arrive, ReqStatus, Step
    from specstate.scenarios import SMALL

    cfg = SMALL.with_(target_kv_pool_size=16, draft_kv_pool_size=16, context_len=12)
    run = Run(cfg, "fixed-threshold")
    for a in (Arrive(12, 8), Arrive(3, 2), Step()):
        run.apply(a)
    assert run.state.reqs[0].status == ReqStatus.ABORTED and run.state.last_batch.rids == (1,)  # type: ignore[union-attr]


def test_first_padded_replay_is_not_a_violation() -> None:
    """Without the reset, a replay at a padded size reads capture-time fill values: harmless.
    The first padded replay (draft-extend at 3 -> 4 in step 6) passes; the stale read is one
    step later, when the draft runner shrinks from 4 rows to 3 under captured size 4."""
    from specstate.check import Run, StopRun
    from specstate.model import Arrive, Step
    from specstate.scenarios import GAPS

    run = Run(GAPS, "stale-graph-padding")
    outcomes = [run.apply(a) for a in (Arrive(8, 2), Arrive(8, 20), Arrive(8, 20), Arrive(8, 20), Step(), Step())]
    padded = [f.graph for o in outcomes for f in o.forwards if f.graph and f.graph.padded_bs != f.graph.raw_bs]
    assert [(g.runner, g.raw_bs, g.padded_bs, g.padding_dirty) for g in padded] == [("draft_extend", 3, 4, False)]
    with pytest.raises(StopRun, match="graph-padding"):
        run.apply(Step())
    assert run.violations[0].actual == "request 3 of step 6"
