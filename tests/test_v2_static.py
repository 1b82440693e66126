"""Static speculation on the v2 overlap worker (sglang 0.5.17 and 0.5.23, no ``--speculative-adaptive``)
and the seed's switch written against ``EAGLEWorkerV2`` (``model/sglang_0_5_17/static.py``,
docs/model-v2.md "Static speculation"): the launch is judged, not refused; the model runs without
an adaptive controller; the naive switch crashes with a minimal trace and the corrected one passes;
upstream's real scheduler (the CPU oracle) agrees with the model on static launches."""

from __future__ import annotations

import pytest

from specstate.model import Arrive, Step, as_variant, initial_state
from specstate.model.sglang_0_5_17.scheduler import alloc_len_per_decode
from specstate.scenarios_v2 import STATIC_CONFIG

FAMILIES = ("sglang-0.5.17", "sglang-0.5.23")
#: the launch users paste for 0.5.17 (``--cuda-graph-max-bs`` is 0.5.17's alias) and 0.5.23
LAUNCH = {"sglang-0.5.17": "python -m sglang.launch_server --model-path M --speculative-algorithm EAGLE3 "
                           "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 "
                           "--cuda-graph-max-bs 16",
          "sglang-0.5.23": "python -m sglang.launch_server --model-path M --speculative-algorithm NEXTN "
                           "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 "
                           "--cuda-graph-max-bs-decode 16"}
PATCH = " --speculative-disable-batch-threshold 5"
#: the variants of each family: (upstream static, naive switch, corrected switch)
VARIANTS = {"sglang-0.5.17": ("upstream-static", "v2-static-switch-naive", "v2-static-switch"),
            "sglang-0.5.23": ("upstream-static@sglang-0.5.23", "v2-static-switch-naive@sglang-0.5.23",
                              "v2-static-switch@sglang-0.5.23")}
#: the fuzzer's minimal trace of the naive switch (``specstate fuzz --variant v2-static-switch-naive``,
#: profile ci): threshold 2, three requests, their prefill, then the decode of 3 rows (the fuzzer's
#: requests want one token; two here, so that 0.5.23, which leaves out a row its queued result
#: finishes, decodes them too)
MINIMAL = [Arrive(1, 2), Arrive(1, 2), Arrive(1, 2), Step(), Step()]
SMALL = STATIC_CONFIG.with_(speculative_num_steps=2, speculative_num_draft_tokens=3, disable_batch_threshold=2,
                            cuda_graph_max_bs=8, cuda_graph_bs_override=(1, 3), max_running_requests=6,
                            chunked_prefill_size=3, target_kv_pool_size=4096, draft_kv_pool_size=4096)


def _launch(family: str, extra: str = "") -> object:
    from specstate.server_args import parse_launch

    default = as_variant(VARIANTS[family][1] if extra else {"sglang-0.5.17": "upstream-adaptive",
                                                            "sglang-0.5.23": "upstream-v23"}[family])
    return parse_launch((LAUNCH[family] + extra).split()[3:], default.name)


# -- the launch: read, not refused ---------------------------------------------------------------

@pytest.mark.parametrize("family", FAMILIES)
def test_a_static_launch_is_read_as_static(family: str) -> None:
    launch = _launch(family)
    cfg = launch.config  # type: ignore[attr-defined]
    assert (cfg.speculative_adaptive, cfg.disable_batch_threshold, cfg.speculative_eagle_topk) == (False, None, 1)
    assert "static speculation" in launch.describe()  # type: ignore[attr-defined]
    assert any("static speculation on EAGLEWorkerV2" in n for n in launch.notes)  # type: ignore[attr-defined]


@pytest.mark.parametrize("family", FAMILIES)
def test_the_patch_flag_reaches_a_static_config_only(family: str) -> None:
    """The switch patch's ``--speculative-disable-batch-threshold`` stays on a static launch (the patch
    reads it); with ``--speculative-adaptive`` upstream's controller decides and it is dropped."""
    from specstate.server_args import parse_launch

    assert _launch(family, PATCH).config.disable_batch_threshold == 5  # type: ignore[attr-defined]
    tokens = (LAUNCH[family] + PATCH + " --speculative-adaptive").split()[3:]
    assert parse_launch(tokens, VARIANTS[family][1]).config.disable_batch_threshold is None


@pytest.mark.parametrize("family", FAMILIES)
def test_topk_above_one_without_adaptive_is_refused_naming_the_tree(family: str) -> None:
    from specstate.errors import UsageError
    from specstate.server_args import parse_launch

    tokens = LAUNCH[family].replace("--speculative-eagle-topk 1 --speculative-num-draft-tokens 4",
                                    "--speculative-eagle-topk 4 --speculative-num-draft-tokens 16").split()[3:]
    with pytest.raises(UsageError, match="topk > 1 on EAGLEWorkerV2 with a draft tree"):
        parse_launch(tokens, "upstream-adaptive" if family == "sglang-0.5.17" else "upstream-v23")


def test_an_adaptive_config_without_the_flag_is_named_unused() -> None:
    from specstate.server_args import parse_launch

    launch = parse_launch(LAUNCH["sglang-0.5.17"].split()[3:] + ["--speculative-adaptive-config", "x.json"],
                          "upstream-adaptive")
    assert launch.config.speculative_adaptive is False
    assert any("unused without --speculative-adaptive" in n for n in launch.notes)


@pytest.mark.parametrize("family", FAMILIES)
def test_check_judges_a_static_launch(family: str) -> None:
    """``specstate check`` on the plain launch: a verdict (pass), the coverage block says static, and
    the switch paths are named unreachable, not merely not steered to."""
    from specstate.testing import check

    r = check(LAUNCH[family], engine=family, parts=("start", "sweep"))
    assert (r.verdict, r.exit_code) == ("pass", 0), r.problems
    cov = r.coverage
    assert "static speculation" in cov["judged"]
    unreached = {p["path"]: p["why"] for p in cov["not_reached"]}
    assert unreached["crossed-up"].startswith("not reachable: static speculation")


# -- the model: no controller -----------------------------------------------------------------------

@pytest.mark.parametrize("family", FAMILIES)
def test_the_static_worker_has_no_controller_and_one_runtime_state(family: str) -> None:
    v = as_variant(VARIANTS[family][0])
    cfg = v.configure(STATIC_CONFIG)
    s = initial_state(cfg)
    assert s.v2 is not None and s.v2.adaptive is None and s.v2.active_steps == 3
    assert sorted(v.ops().runtime_states(v.ops(), cfg)) == [3]
    start = v.engine_family.start(v.ops(), cfg)
    assert {c.state for c in start.captures} == {3} and start.candidates == (3,)


def test_the_reservation_reads_the_launch_not_the_default_adaptive_config() -> None:
    """``get_alloc_len_per_decode``: ``max_speculative_num_draft_tokens`` is the launch's 4 draft tokens
    without ``--speculative-adaptive``; with it (no config) the default config's largest candidate 7 + 1."""
    static = STATIC_CONFIG.with_(speculative_adaptive_config=None)
    assert alloc_len_per_decode(static) == 4
    assert alloc_len_per_decode(static.with_(speculative_adaptive=True)) == 8


@pytest.mark.parametrize("family", FAMILIES)
def test_upstream_static_never_switches_even_with_a_threshold(family: str) -> None:
    from specstate.scenarios import run_scenario

    r = run_scenario("static-sweep", VARIANTS[family][0], 0)
    assert r.ok, r.first and r.first.describe()
    assert r.paths.get("crossed-up", 0) == 0


def test_the_config_field_round_trips_and_is_omitted_at_its_default() -> None:
    from specstate.schema import config_from_data

    assert "speculative_adaptive" not in STATIC_CONFIG.with_(speculative_adaptive=True).to_json()
    data = STATIC_CONFIG.to_json()
    assert data["speculative_adaptive"] is False
    assert config_from_data(data) == STATIC_CONFIG


# -- the seed's switch on EAGLEWorkerV2 ---------------------------------------------------------------

@pytest.mark.parametrize("family", FAMILIES)
def test_the_naive_switch_crashes_in_the_draft_extend_graph(family: str) -> None:
    """Steps 0 with the launch's draft-token width: the draft-extend graph replays ``bs`` input ids
    against ``bs * 3`` positions (``EAGLEDraftExtendCudaGraphRunner.execute``)."""
    from specstate.check import run_actions

    r = run_actions(as_variant(VARIANTS[family][1]).configure(SMALL), VARIANTS[family][1], MINIMAL)
    v = r.first
    assert v is not None and v.invariant == "worker-crash"
    assert "EAGLEDraftExtendCudaGraphRunner.execute" in v.describe()
    assert "The size of tensor a (3) must match the size of tensor b (9)" in v.describe()
    assert v.shapes["field"] == "positions"


@pytest.mark.parametrize("family", FAMILIES)
def test_the_minimal_trace_is_one_minimal(family: str) -> None:
    """Dropping any one action of the fuzzer's trace no longer crashes."""
    from specstate.check import run_actions

    name = VARIANTS[family][1]
    cfg = as_variant(name).configure(SMALL)
    for i in range(len(MINIMAL)):
        assert run_actions(cfg, name, MINIMAL[:i] + MINIMAL[i + 1:]).ok


@pytest.mark.parametrize("family", FAMILIES)
def test_the_corrected_switch_passes_where_the_naive_one_crashes(family: str) -> None:
    from specstate.check import run_actions
    from specstate.scenarios import run_scenario

    name = VARIANTS[family][2]
    assert run_actions(as_variant(name).configure(SMALL), name, MINIMAL).ok
    r = run_scenario("static-sweep", name, 0)
    assert r.ok, r.first and r.first.describe()
    assert r.paths.get("crossed-up", 0) > 0 and r.paths.get("crossed-down", 0) > 0


def test_the_naive_switch_past_the_graphs_is_caught_eager() -> None:
    """Above the largest captured size the draft extend runs eager on the same mismatched batch: the
    model flags ``next_token_logits[select_index]`` (bs rows, indices stepping by the stale width)."""
    from specstate.check import run_actions

    cfg = as_variant("v2-static-switch-naive").configure(SMALL.with_(cuda_graph_bs_override=(1,), cuda_graph_max_bs=1))
    r = run_actions(cfg, "v2-static-switch-naive", MINIMAL)
    assert r.first is not None and "EagleDraftWorker._draft_extend_for_decode" in r.first.describe()


def test_the_corrected_switch_runs_steps_zero_eager() -> None:
    """1 token per request does not match the runners captured at ``steps + 1``: verify and draft
    extend run eager at steps 0 (``can_run_graph``'s uniform-width check), and replay again after."""
    from specstate.check import Run
    from specstate.model.modes import Worker

    cfg = as_variant("v2-static-switch").configure(SMALL)
    run = Run(cfg, "v2-static-switch")
    graphs = []
    for a in MINIMAL + [Step(), Step()]:
        o = run.apply(a)
        graphs.append({f.phase: f.graph is not None for f in o.forwards if f.worker in (Worker.TARGET, Worker.DRAFT)})
    assert graphs[4] == {"verify": False, "draft_extend": False}  # the first decode: 3 rows, steps 0
    assert run.result().ok


# -- upstream's scheduler on CPU (the oracle) on static launches ------------------------------------------

STATIC_WORKLOAD = [Arrive(10, 6), Arrive(12, 5, 0, 6), Step(), Step(accept=(2,)), Step(accept=(3, 1)),
                   Step(accept=(4, 4)), Arrive(30, 4), Step(), Step(), Step(), Step(), Step()]


@pytest.mark.parametrize("release", ["0.5.17", "0.5.23"])
def test_the_oracle_runs_upstream_static_and_agrees(release: str, oracle_of) -> None:  # noqa: ANN001
    from specstate.integration.oracle_differential import differential

    cfg = STATIC_CONFIG.with_(disable_batch_threshold=None, target_hidden_size=256, draft_hidden_size=256,
                              max_running_requests=4, chunked_prefill_size=16, target_kv_pool_size=4096,
                              draft_kv_pool_size=4096, cuda_graph_max_bs=8)
    oracle = oracle_of(release)  # the session's oracle process (tests/conftest.py)
    d = differential(release, cfg, STATIC_WORKLOAD, oracle=oracle)
    assert d.oracle.error is None, d.oracle.error
    assert [o.adaptive_after for o in d.oracle.observations] == [None] * len(d.oracle.observations)
    assert {o.steps for o in d.oracle.observations if o.kind == "decode"} == {3}
    assert d.ok, d.describe()
    # a model that reserved the default adaptive config's width on a static launch is caught
    from specstate.model import Variant
    from specstate.integration.oracle_differential import judge

    def reserve_like_adaptive(ops, s):  # noqa: ANN001, ANN202
        return 2 * 8

    base = "upstream-adaptive" if release == "0.5.17" else "upstream-v23"
    wrong = Variant("static-reserve-mutation", "reserve as if adaptive", base=base,
                    overrides={"alloc_reserve_per_decode": reserve_like_adaptive})
    mismatches, _ = judge(d.oracle, cfg, STATIC_WORKLOAD, wrong)
    assert mismatches and mismatches[0].field in ("kv_after", "req_kv_after"), [m.describe() for m in mismatches[:2]]


def test_a_recording_of_a_static_launch_is_read_as_static() -> None:
    """The 0.5.17 recorder writes ``server_args.speculative_adaptive``; false is a static launch
    (a recording's header without the key reads as before: adaptive)."""
    from specstate.integration.sglang_0_5_17.conformance import config_from_header

    assert config_from_header({"server_args": {"speculative_adaptive": False}}).speculative_adaptive is False
    assert config_from_header({"server_args": {"speculative_adaptive": True}}).speculative_adaptive is True
    assert config_from_header({"server_args": {}}).speculative_adaptive is True


def test_oracle_static_is_refused_on_a_spec_v1_release(capsys: pytest.CaptureFixture[str]) -> None:
    from specstate.cli import main

    assert main(["oracle", "--engine", "0.5.12", "--static"]) == 2
    assert "--static: expected an overlap release" in capsys.readouterr().err
    assert main(["oracle", "--engine", "0.5.17", "--trace", "t.json", "--static"]) == 2
    err = capsys.readouterr().err
    assert "--static" in err and "not with --trace" in err
