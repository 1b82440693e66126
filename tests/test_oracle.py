"""The oracle: sglang's real scheduler on CPU against the model (specstate/oracle, docs/oracle.md),
one table for every release with an oracle (``specstate/oracle/catalog.py``'s ``RELEASES``, read from
the release folders): a new release adds rows here (its workloads in ``RUNS``, its mutants in
``MUTANTS``, what its workloads reach in ``REACHED``), not a file; ``test_every_oracle_release_has_rows``
fails until it does.

Per release, each hand workload runs once on upstream's scheduler (the session's oracle process of
that release, ``tests/conftest.py``; every workload on a fresh upstream ``Scheduler``) and is compared
with the release's own variant (``catalog.VARIANTS``); the same runs then judge the release's mutants
(the oracle's run does not depend on the variant) and say what upstream's objects reached.

- the v1 releases (0.5.9, 0.5.12): chunked prefill with aborts of waiting / running / chunked
  requests and a prefix hit, a request finishing in verify (``kv-leak-spec-tail`` never frees its
  rejected draft slots: the oracle's allocator says otherwise), the over-long prompt prefilled as one
  token, an abort by id prefix;
- the overlap releases (0.5.17, 0.5.23: upstream's ``Scheduler`` under ``event_loop_overlap`` with a
  fake ``EAGLEWorkerV2``): both decode paths and the adaptive switch, EOS, chunked prefill with
  aborts, a prefix hit after a finish, the out-of-memory abort, the result processed one iteration
  late; 0.5.23 also the stories of ``tests/test_v23_model.py`` where 0.5.18-0.5.23 changed the
  scheduler's state (the finish order, the tokens a finished request leaves in the tree, the decode
  0.5.22 no longer runs, finished rows out at every step), a retraction, a retracted request's
  re-prefill whose tree node 0.5.23 splits at the prompt boundary, and the waiting requests' refreshed
  tree paths: upstream 0.5.23 agrees with the 0.5.23 family on every one and disagrees with the
  0.5.17 family (the same actions) and with mutations of the 0.5.23 family that put a 0.5.17
  operation back.

The tests that run the oracle need the release's wheel (``pip download --no-deps``, cached in
``~/.cache/specstate/wheels``, pinned by sha256); without it and without a package registry they skip
with one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, NamedTuple

import pytest

from specstate.fuzz.trace import load_trace
from specstate.model import Abort, Arrive, SpecConfig, Step, Variant
from specstate.oracle import catalog, stubs
from specstate.oracle.tokens import EOS, output_token, prompts
from specstate.scenarios_v2 import SMALL_V2
from tests.test_v23_model import RETRACT_SPLIT, RETRACT_SPLIT_CONFIG

#: the overlap releases' adaptive config: steps 3 for one request, steps 0 (the trivial verify) from
#: two: both paths and the switch
ADAPTIVE = '{"1": {"candidate_steps": [3]}, "2": {"candidate_steps": [0]}}'


def config(release: str, **kw: object) -> SpecConfig:
    """The hand workloads' config for ``release``: 3 steps, a 4096-slot pool, chunks of 16, 4 rows;
    where the release's oracle runs the overlap loop (``catalog.is_overlap``), with it and ``ADAPTIVE``."""
    base: dict[str, object] = dict(speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4,
                                   disable_batch_threshold=None, target_kv_pool_size=4096, draft_kv_pool_size=4096,
                                   chunked_prefill_size=16, max_running_requests=4)
    if catalog.is_overlap(release):
        base.update(cuda_graph_max_bs=8, disable_overlap_schedule=False, speculative_adaptive_config=ADAPTIVE)
    base.update(kw)
    return SpecConfig(**base)  # type: ignore[arg-type]


class Workload(NamedTuple):
    """A hand workload: its actions, and its config (``over`` applied to ``config(release)``, or to
    ``fixed`` where the workload comes with a config of its own)."""

    actions: list[Any]
    over: dict[str, object] = {}
    fixed: SpecConfig | None = None

    def config(self, release: str) -> SpecConfig:
        return config(release, **self.over) if self.fixed is None else self.fixed.with_(**self.over)


_EVICT = load_trace(Path(__file__).resolve().parents[1] / "docs" / "results" / "oracle-0_5_23-evict-8-vs-6.json")

#: every hand workload, by name (``RUNS`` says on which releases each runs)
WORKLOADS: dict[str, Workload] = {
    "chunked-aborts-prefix": Workload([Arrive(40, 6), Step(), Abort(0), Arrive(10, 8, prefix_of=0, shared_len=8),
                                       Arrive(30, 4), Arrive(12, 9), Step(), Abort(3), Step(),
                                       Step(accept=(2, 3), eos=(2,)), Abort(1)] + [Step()] * 8),
    # request 0 finishes in verify with 2 of 4 draft tokens rejected
    "finish-in-verify": Workload([Arrive(10, 2), Arrive(12, 9), Step(), Step(accept=(1, 1)), Step(), Step()]),
    # ``validate_input_length`` + ``Req.set_finish_with_abort``: queued as one token, prefilled, finished
    "over-long-prompt": Workload([Arrive(25, 1), Step()], dict(speculative_num_steps=1, speculative_num_draft_tokens=2,
                                                                target_kv_pool_size=12, draft_kv_pool_size=12,
                                                                max_running_requests=1)),
    # ``abort_request`` matches ids by prefix; the oracle's ids are fixed-width (``rid_name``)
    "abort-id-prefix": Workload([Arrive(1, 1)] * 11 + [Abort(1), Step()],
                                dict(speculative_num_steps=1, speculative_num_draft_tokens=2, max_running_requests=1)),
    "two-requests-switch": Workload([Arrive(10, 6), Arrive(12, 5, 0, 6), Step(), Step(accept=(2,)), Step(accept=(3, 1)),
                                     Step(accept=(4, 4)), Step(), Step(), Step(), Step()]),
    "one-request-spec-eos": Workload([Arrive(9, 30), Step(), Step(accept=(4,)), Step(accept=(2,)),
                                      Step(accept=(3,), eos=(0,)), Step(), Step(), Step()]),
    "prefix-hit-after-finish": Workload([Arrive(20, 3), Step(), Step(accept=(4,)), Step(), Step(), Step(),
                                         Arrive(24, 3, 0, 18), Step(), Step(), Step(), Step()]),
    "tight-pool-retract": Workload([Arrive(4, 60), Arrive(5, 60), Arrive(3, 60), Step()] + [Step()] * 60,
                                   {"target_kv_pool_size": 60, "draft_kv_pool_size": 60, "chunked_prefill_size": 64}),
    # upstream's overlap loop processes a batch's result one iteration after launching it
    "overlap-lag": Workload([Arrive(10, 6), Step(), Step(accept=(4,)), Step()]),
    # the stories of tests/test_v23_model.py (SMALL_V2: 3 steps up to batch size 2, a 512-slot pool), and a retraction
    "cap-with-eos": Workload([Arrive(8, 5), Step(), Step(accept=(4,), eos=(0,)), Step(), Step()], fixed=SMALL_V2),
    "tree-through-the-cap": Workload([Arrive(8, 2), Step(), Step(accept=(4,)), Step(), Step()], fixed=SMALL_V2),
    "queued-result-finishes": Workload([Arrive(8, 4), Step(), Step(accept=(2,)), Step(accept=(2,)), Step(accept=(2,)),
                                        Step()], fixed=SMALL_V2),
    "finished-row-then-prefill": Workload([Arrive(8, 3), Arrive(8, 30), Step(), Step(accept=(4, 1)),
                                           Step(accept=(1, 1)), Arrive(20, 6), Step(), Step(), Step(accept=(3,)), Step(),
                                           Step()], fixed=SMALL_V2),
    "retract": Workload([Arrive(3 + i, 30) for i in range(5)] + [Step()] * 70,  # 3 rows decode, then a retraction
                        {"target_kv_pool_size": 100, "draft_kv_pool_size": 100}, fixed=SMALL_V2),
    # the fuzzer's two minimal workloads (0.5.23's admission: docs/oracle.md, tests/test_v23_model.py)
    "chunk-row-held": Workload([Arrive(1, 1), Arrive(1, 20), Arrive(6, 20), Arrive(1, 20), Step(), Step(), Step(), Step()],
                               {"max_running_requests": 4, "chunked_prefill_size": 7}, fixed=SMALL_V2),
    "chunk-spends-budget": Workload([Arrive(25, 1), Step(), Arrive(1, 1), Step(), Step(), Step(), Step(), Step()],
                                    {"max_running_requests": 1, "chunked_prefill_size": 7}, fixed=SMALL_V2),
    # the fuzzer's minimal workload for the split at the prompt boundary (tests/test_v23_model.py)
    "retract-then-split": Workload(RETRACT_SPLIT, fixed=RETRACT_SPLIT_CONFIG),
    # the fuzzer's workload for the waiting requests' refreshed tree paths (docs/oracle.md, fix 4)
    "waiting-prefix-refresh": Workload(list(_EVICT.actions), fixed=_EVICT.config),
}

_V1 = ("chunked-aborts-prefix", "finish-in-verify", "over-long-prompt", "abort-id-prefix")
_OVERLAP = ("two-requests-switch", "one-request-spec-eos", "chunked-aborts-prefix", "prefix-hit-after-finish",
            "tight-pool-retract", "overlap-lag")

#: the rows: each release with an oracle -> the hand workloads it runs (a new release: a row)
RUNS: dict[str, tuple[str, ...]] = {
    "0.5.9": _V1,
    "0.5.12": _V1,
    "0.5.17": _OVERLAP,
    "0.5.23": _OVERLAP + ("cap-with-eos", "tree-through-the-cap", "queued-result-finishes", "finished-row-then-prefill",
                          "retract", "chunk-row-held", "chunk-spends-budget", "retract-then-split",
                          "waiting-prefix-refresh"),
}

#: what upstream's own objects reach over a release's workloads (``OracleRun.reached``), and the
#: decode paths its observations take
REACHED: dict[str, tuple[set[str], set[str]]] = {
    "0.5.9": ({"chunked-prefill", "abort-chunked", "abort-waiting", "abort-running", "prefix-hit"}, set()),
    "0.5.12": ({"chunked-prefill", "abort-chunked", "abort-waiting", "abort-running", "prefix-hit"}, set()),
    "0.5.17": ({"chunked-prefill", "abort-chunked", "abort-waiting", "abort-running", "prefix-hit"},
               {"spec", "trivial", "extend"}),
    # the list: speculative and trivial decodes (the switch), chunked prefill, an abort of the
    # chunked request, a retraction, the out-of-memory abort
    "0.5.23": ({"chunked-prefill", "abort-chunked", "abort-running", "abort-waiting", "retraction", "oom-abort",
                "prefix-hit", "eviction"}, {"spec", "trivial", "extend"}),
}


def _expect_chunked(d: Any) -> None:
    idle = {"none"} if catalog.is_overlap(d.release) else set()  # the overlap loop observes its idle steps
    assert {o.kind for o in d.model} == {"prefill", "decode"} | idle
    assert {"chunked-prefill", "abort-chunked", "abort-waiting", "abort-running", "prefix-hit"} <= set(d.oracle.reached)


def _expect_over_long(d: Any) -> None:
    assert d.oracle.observations and d.oracle.observations[0].extend_lens == (1,)  # upstream: one prefill of 1 token


def _expect_abort_id_prefix(d: Any) -> None:
    assert d.oracle.observations[0].waiting_after == tuple(range(2, 11))


def _expect_overlap_lag(d: Any) -> None:
    """The first decode iteration processes the prefill (one token each), not its own accepted run."""
    first, second, third = d.oracle.observations
    assert (first.kind, first.processed) == ("prefill", ())
    assert (second.kind, second.path, second.steps, second.processed, second.out_lens_after) == \
        ("decode", "spec", 3, (0,), (1,))
    assert third.out_lens_after == (5,)  # the 4 accepted in the second iteration, seen in the third


#: what upstream's observations of a workload show, on every release that runs it
EXPECT: dict[str, Callable[[Any], None]] = {
    "chunked-aborts-prefix": _expect_chunked,
    "over-long-prompt": _expect_over_long,
    "abort-id-prefix": _expect_abort_id_prefix,
    "overlap-lag": _expect_overlap_lag,
}


class Mutant(NamedTuple):
    """A variant upstream's scheduler must disagree with (a mismatch or a model invariant violation)
    on one of the release's workloads; ``workload`` and ``field``: on that workload, with that first
    mismatching field."""

    variant: str | Variant
    workload: str | None = None
    field: str | None = None


def _mutants_v1() -> list[Mutant]:
    return [Mutant("kv-leak-spec-tail", "finish-in-verify", "kv_after")]


def _mutants_v17() -> list[Mutant]:
    """The scheduler-side v2 known bugs, and the mutation study's scheduler-side v2 mutations
    (tests/mutations.py; the start one is not the oracle's to judge: it starts no engine)."""
    from tests.mutations import _v2_mutations

    study = [m for m in _v2_mutations() if not m.summary.startswith("[start]")]
    assert len(study) == 3
    return [Mutant(v) for v in ("v2-alloc-follows-active-steps", "v2-single-reserve", "v2-downswitch-unclamped",
                                "v2-commit-after-finish", "v2-skip-zero-step-draft-extend", *study)]


def _schedule_prefill_unrefreshed(ops: object, tx: object) -> object:
    """0.5.23's ``schedule_prefill`` without ``calc_priority``'s refresh of the waiting requests' paths."""
    from specstate.model.sglang_0_5_23 import admission

    refresh = admission.touch_waiting_prefixes
    admission.touch_waiting_prefixes = lambda s: s  # type: ignore[assignment]
    try:
        return admission.schedule_prefill_v23(ops, tx)  # type: ignore[arg-type]
    finally:
        admission.touch_waiting_prefixes = refresh  # type: ignore[assignment]


def _mutants_v23() -> list[Mutant]:
    """The 0.5.17 family, the 0.5.23 family with one 0.5.17 operation put back, and the scheduler-side
    v2 bugs rebased onto it (``model/sglang_0_5_17/variants.py``). Not here: 0.5.17's
    ``update_finish_state`` order (length before EOS) changes only the finish *reason*, which no
    observation holds (the output and the tokens kept are the same either way: ``cap-with-eos``
    agrees with both)."""
    from specstate.model import get_variant
    from specstate.model.ops import DEFAULT_OPS
    from specstate.model.sglang_0_5_17.variants import V2_OVERRIDES
    from specstate.model.sglang_0_5_23.finish import release_kv_cache_owned

    def back(name: str, *ops: str) -> Variant:
        return Variant(name, f"0.5.23 with 0.5.17's {', '.join(ops)}",
                       overrides={op: V2_OVERRIDES.get(op, getattr(DEFAULT_OPS, op)) for op in ops}, base="upstream-v23")

    rebased = [Variant(f"{b}-on-v23", get_variant(b).summary, overrides=dict(get_variant(b).overrides),
                       base="upstream-v23")
               for b in ("v2-alloc-follows-active-steps", "v2-single-reserve", "v2-downswitch-unclamped",
                         "v2-commit-after-finish")]
    unsplit = Variant("v23-tree-unsplit", "0.5.23 without the split at the prompt boundary",
                      overrides={"cache_unfinished_req": DEFAULT_OPS.cache_unfinished_req,
                                 "release_kv_cache": release_kv_cache_owned}, base="upstream-v23")
    unrefreshed = Variant("v23-no-waiting-refresh", "0.5.23 without calc_priority's refresh of the waiting requests' "
                          "tree paths", overrides={"schedule_prefill": _schedule_prefill_unrefreshed}, base="upstream-v23")
    variants = [back("v23-scheduling-of-0.5.17", "get_next_batch_to_run"), back("v23-admission-of-0.5.17", "schedule_prefill"),
                back("v23-release-of-0.5.17", "release_kv_cache"), unsplit, unrefreshed, *rebased]
    return [Mutant("upstream-adaptive")] + [Mutant(v) for v in variants]


#: each release -> the mutants its oracle must catch on its workloads (none: its own variant only)
MUTANTS: dict[str, Callable[[], list[Mutant]]] = {
    "0.5.9": list,
    "0.5.12": _mutants_v1,
    "0.5.17": _mutants_v17,
    "0.5.23": _mutants_v23,
}

_ROWS = [(release, name) for release in catalog.RELEASES for name in RUNS.get(release, ())]
_DIFFERENTIALS: dict[tuple[str, str], Any] = {}


def _differential(release: str, name: str, oracle_of: Callable[[str], Any]) -> Any:
    """The release's variant against upstream on workload ``name``, run once per session (the
    oracle's run is then judged again by the other tests)."""
    from specstate.integration.oracle_differential import differential

    key = (release, name)
    if key not in _DIFFERENTIALS:
        w = WORKLOADS[name]
        _DIFFERENTIALS[key] = differential(release, w.config(release), w.actions, oracle=oracle_of(release))
    return _DIFFERENTIALS[key]


def test_every_oracle_release_has_rows() -> None:
    """A release with an oracle module (the catalog reads the release folders) has its workloads,
    what they reach and its mutants here; the table names no release that has none."""
    assert set(RUNS) == set(REACHED) == set(MUTANTS) == set(catalog.RELEASES)
    assert all(RUNS[r] and set(RUNS[r]) <= set(WORKLOADS) for r in RUNS)
    assert set(WORKLOADS) == set().union(*RUNS.values())  # no workload left unrun
    assert set(EXPECT) <= set(WORKLOADS)


def test_every_stub_says_why_it_is_safe() -> None:
    assert set(stubs.STUBBED) >= {"sgl_kernel", "flashinfer", "transformers"}
    assert all(len(why) > 20 for why in stubs.STUBBED.values())


def test_prompts_share_exactly_the_named_prefix() -> None:
    ps = prompts([Arrive(8, 1), Arrive(6, 1, prefix_of=0, shared_len=3), Arrive(5, 1, prefix_of=1, shared_len=5)])
    assert ps[1][:3] == ps[0][:3] and ps[1][3] != ps[0][3]
    assert ps[2][:5] == ps[1][:5] and ps[2][3] != ps[0][3]
    assert len({output_token(0, 0), output_token(1, 0), EOS} | set(ps[0])) == 3 + len(ps[0])


def test_request_ids_do_not_extend_one_another() -> None:
    """``abort_request`` matches ids by prefix (``abort-id-prefix``): the oracle's are fixed-width."""
    from specstate.oracle.driver import rid_name

    assert not rid_name(10).startswith(rid_name(1))


@pytest.mark.parametrize("release,name", _ROWS, ids=[f"{r}-{n}" for r, n in _ROWS])
def test_hand_workloads_conform(oracle_of, release: str, name: str) -> None:  # noqa: ANN001
    """Upstream runs the workload through (the overlap loop: one observation per step), and the release's own variant
    (``catalog.VARIANTS``) agrees with it, with no invariant violation of its own."""
    d = _differential(release, name, oracle_of)
    actions = WORKLOADS[name].actions
    assert d.oracle.error is None, d.oracle.error
    steps = sum(isinstance(a, Step) for a in actions)
    # the overlap loop observes every step (an idle one too); the v1 loop only the steps that run a batch
    assert len(d.oracle.observations) == steps if catalog.is_overlap(release) else len(d.oracle.observations) <= steps
    assert d.ok, d.describe() + "".join(f"\n  {m.describe()}" for m in d.mismatches[1:6])
    assert not d.violations, [v.describe() for v in d.violations[:3]]
    if name in EXPECT:
        EXPECT[name](d)


@pytest.mark.parametrize("release", [r for r in catalog.RELEASES if r in RUNS])
def test_the_workloads_reach_what_the_release_names(oracle_of, release: str) -> None:  # noqa: ANN001
    """What upstream's own objects reached over the release's workloads, and the decode paths taken."""
    runs = [_differential(release, n, oracle_of).oracle for n in RUNS[release]]
    reached, paths = REACHED[release]
    assert reached <= set().union(*(r.reached for r in runs)), [r.reached for r in runs]
    assert paths <= {o.path for r in runs for o in r.observations}


@pytest.mark.parametrize("release", [r for r in catalog.RELEASES if r in MUTANTS])
def test_the_oracle_judges_the_release_and_its_mutants(oracle_of, release: str) -> None:  # noqa: ANN001
    """Upstream disagrees (a mismatch or a model invariant violation) with every mutant of the release
    on its workloads, and agrees with the release's own variant (``test_hand_workloads_conform``)."""
    from specstate.integration.oracle_differential import judge

    runs = {n: _differential(release, n, oracle_of) for n in RUNS[release]}
    assert all(d.ok and not d.violations for d in runs.values())

    def caught(m: Mutant) -> bool:
        for n, d in runs.items():
            if m.workload is not None and n != m.workload:
                continue
            w = WORKLOADS[n]
            mism, violations = judge(d.oracle, w.config(release), w.actions, m.variant)
            if m.field is not None:
                if mism and mism[0].field == m.field:
                    return True
            elif mism or violations:
                return True
        return False

    missed = [getattr(m.variant, "name", m.variant) for m in MUTANTS[release]() if not caught(m)]
    assert not missed, missed


def test_without_the_registry_the_error_names_the_release_and_the_folder(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    import subprocess

    from specstate import upstream
    from specstate.oracle import wheels

    release = catalog.RELEASES[-1]
    monkeypatch.setenv("SPECSTATE_SGLANG_CACHE", str(tmp_path))
    monkeypatch.setattr(upstream.subprocess, "run",
                        lambda *a, **k: subprocess.CompletedProcess(a, 1, "", "no index"))
    with pytest.raises(wheels.OracleUnavailable) as e:
        wheels.unpacked(release)
    assert f"sglang {release}" in str(e.value) and str(tmp_path / "wheels") in str(e.value)
    assert "\n" not in str(e.value)
