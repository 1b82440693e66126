"""The worker oracle (``specstate/oracle/worker``): upstream's own ``ForwardBatch.init_new``,
``CudaGraphRunner.can_run`` and ``replay_prepare`` on CPU, 0.5.9 and 0.5.12, fed the model's batches.

One oracle process per release for the module (imports ~3 s); the fuzz stream is derandomized
(one stream, one result). docs/oracle.md, "The worker oracle".
"""

from __future__ import annotations

import random
from typing import Any, Iterator

import pytest

from specstate.oracle.worker.catalog import RELEASES

EXAMPLES = 500  #: fuzzed workloads per release (>= 200 batches each: 2516 measured)


@pytest.fixture(scope="module", params=RELEASES)
def process(request: pytest.FixtureRequest) -> Iterator[Any]:
    from specstate.oracle.wheels import OracleUnavailable, cache_dir, unpacked
    from specstate.oracle.worker.compare import WorkerProcess

    release = request.param
    try:
        unpacked(release)
    except OracleUnavailable:
        pytest.skip(f"sglang {release}: no wheel in {cache_dir() / 'wheels'} and no package registry to fetch it")
    with WorkerProcess(release) as p:
        yield p


def _seed_sweep(process: Any, variant: Any) -> Any:
    from specstate.oracle.worker.differential import worker_differential
    from specstate.scenarios import get_scenario

    scenario = get_scenario("seed-sweep")
    return worker_differential(process, scenario.config, variant, lambda run: scenario.play(run, random.Random(0)))


def _of_release(process: Any, variant: str) -> str:
    """``variant`` as the release's own model family registers it (``NAME@sglang-0.5.9``)."""
    from specstate.oracle.worker.catalog import release

    family = release(process.release).family
    return variant if family == "sglang-0.5.12" else f"{variant}@{family}"


# the seed's sweep (C = 1, 2, 5, 10, ...; threshold 5, 16 draft tokens), one row per variant
SWEEP = [
    # the seed's patch, graph path: upstream raises what the model predicts at C=10, 160 vs 10
    ("naive-threshold", {"graph", "RuntimeError@replay_prepare"}),
    # the literal patch: can_run refuses (stale LAST != FULL); eager from then on (its crash is the backend's)
    ("naive-threshold-eager", {"graph", "eager"}),
    # the correct variants: every graph replay raises nothing; above the largest captured size eager
    ("fixed-threshold", {"graph"}),  # its fallback bypasses the graph runner: not fed
    ("always-spec", {"graph", "eager"}),
    ("steps0-verify", {"graph", "eager"}),
]
#: the rows under -m slow: the two upstream policies (the fast tier keeps the seed's patch in both
#: forms and the fix)
_SLOW_SWEEP = {"always-spec", "steps0-verify"}


@pytest.mark.parametrize("variant,reached", [pytest.param(v, r, id=v, marks=pytest.mark.slow if v in _SLOW_SWEEP else ())
                                             for v, r in SWEEP])
def test_the_seed_sweep_agrees(process: Any, variant: str, reached: set[str]) -> None:
    d = _seed_sweep(process, _of_release(process, variant))
    assert d.ok, d.mismatch.describe() if d.mismatch else ""
    assert d.reached == reached, d.reached
    if variant == "naive-threshold":
        last = d.answers[-1]["error"]
        assert (last["class"], last["sizes"]) == ("RuntimeError", [160, 10]), last
        assert len(d.batches[-1][0]["seq_lens"]) == 10  # C = 10


#: the seed's patch as the seed describes it (issue 35) on the seed's benchmark (one repeated prompt):
#: what upstream raises at C=10, per release, on the batch the model hands it
SEED_PATCH = {
    ("seed-patch", "0.5.9"): ("RuntimeError", "sizes", [160, 2]),  # sequential copies: input_ids first
    ("seed-patch", "0.5.12"): ("AttributeError", "attribute", ["NoneType", "dtype"]),  # out_cache_loc None
    ("seed-patch-alloc", "0.5.9"): ("RuntimeError", "sizes", [160, 2]),
    ("seed-patch-alloc", "0.5.12"): ("RuntimeError", "sizes", [160, 2]),
}


@pytest.mark.parametrize("variant", ["seed-patch", "seed-patch-alloc"])
def test_the_seed_patch_raises_what_the_model_predicts(process: Any, variant: str) -> None:
    """The model's batches of the seed's benchmark, fed to upstream's own graph replay: the first
    replay above the threshold raises, in upstream's code, the exception the model predicts
    (class and sizes), and every replay before it raises nothing."""
    from specstate.oracle.worker.differential import worker_differential
    from specstate.scenarios import get_scenario

    name = _of_release(process, variant)
    scenario = get_scenario("seed-benchmark")
    d = worker_differential(process, scenario.config, name, lambda run: scenario.play(run, random.Random(0)))
    assert d.ok, d.mismatch.describe() if d.mismatch else ""
    errors = [a["error"] for a in d.answers if a.get("error")]
    assert len(errors) == 1 and d.answers[-1]["error"] is errors[0]  # the run ends at the first raise
    cls, key, value = SEED_PATCH[(variant, process.release)]
    assert (errors[0]["class"], errors[0][key], errors[0]["stage"]) == (cls, value, "replay_prepare")
    assert len(d.batches[-1][0]["seq_lens"]) == 10  # C = 10


#: issue 35's hand-built batches: 10 requests, 16 draft tokens, input_ids kept at 2 rows
HAND = {
    # out_cache_loc as merge_batch leaves it (None): 0.5.9 copies field by field, input_ids first;
    # 0.5.10+ batch the copies and read out_cache_loc.dtype before any copy
    ("0.5.9", None): ("RuntimeError", "sizes", [160, 2]),
    ("0.5.12", None): ("AttributeError", "attribute", ["NoneType", "dtype"]),
    # out_cache_loc allocated by the patch (10 rows): both raise on input_ids
    ("0.5.9", 10): ("RuntimeError", "sizes", [160, 2]),
    ("0.5.12", 10): ("RuntimeError", "sizes", [160, 2]),
}


@pytest.mark.parametrize("loc", [None, 10], ids=["out_cache_loc-None", "out_cache_loc-10"])
def test_hand_built_two_row_input_ids(process: Any, loc: int | None) -> None:
    from specstate.model import get_variant
    from specstate.model.families import get_family
    from specstate.oracle.worker.batches import hand_batch
    from specstate.oracle.worker.catalog import release
    from specstate.oracle.worker.compare import compare_batch
    from specstate.scenarios import SEED_CONFIG

    family = get_family(release(process.release).family)  # the model family the release is compared with
    ops = get_variant(family.default_variant).ops()
    batch, expected = hand_batch(family.prepare(SEED_CONFIG), bs=10, input_ids=2, out_cache_loc=loc, ops=ops)
    (answer,) = process.run([batch])
    cls, key, value = HAND[(process.release, loc)]
    assert answer["graph"] is True
    assert (answer["error"]["class"], answer["error"][key], answer["error"]["stage"]) == (cls, value, "replay_prepare")
    mismatch = compare_batch(batch, expected, answer)
    assert mismatch is None, mismatch.describe()


def _rebuilt_input_ids(ops: Any, runner: Any, fb: Any, graphs: Any, iteration: int, config: Any) -> Any:
    """A modelling mistake: the replay copies ``input_ids`` as if rebuilt to the graph's width
    (``raw_bs * num_tokens_per_bs`` rows) where upstream copies the batch's own."""
    from specstate.model.replay import replay_prepare
    from specstate.model.values import evolve

    if runner.worker.value == "target":
        fb = evolve(fb, input_ids=(fb.batch_size * runner.num_tokens_per_bs,))
    return replay_prepare(ops, runner, fb, graphs, iteration, config)


def test_a_model_that_rebuilds_input_ids_in_replay_is_caught(process: Any) -> None:
    """The mutated model still crashes at C=10 with 160 vs 10 (now on ``out_cache_loc``): class and
    message sizes agree, the sizes it reports of the copy (``input_ids`` 160 rows) do not."""
    from specstate.model.variant_registry import Variant

    mutated = Variant("replay-rebuilds-input-ids", "replay copies input_ids rebuilt to the graph's width",
                      overrides={"replay_prepare": _rebuilt_input_ids}, base="naive-threshold")
    d = _seed_sweep(process, mutated)
    assert d.mismatch is not None and d.mismatch.field == "shapes.input_ids", d.mismatch
    assert (d.mismatch.model, d.mismatch.upstream) == ([160], [10])


@pytest.mark.fuzz
def test_fuzzed_batches_agree(process: Any) -> None:
    from specstate.oracle.worker.fuzz import fuzz_worker

    res = fuzz_worker(process.release, examples=EXAMPLES, shrink=False, process=process)
    assert res.failure is None, res.failure.mismatch.describe() if res.failure and res.failure.mismatch else res.failure
    assert res.batches >= 200, res.batches
    assert {"graph", "eager", "RuntimeError@replay_prepare"} <= set(res.reached), res.reached


def test_every_variant_of_the_family_is_judged() -> None:
    from specstate.oracle.worker.catalog import release
    from specstate.oracle.worker.differential import variants_for

    for r in RELEASES:
        family = release(r).family
        names = variants_for(r)
        # a release's own policies carry its family's name (``seed-patch@sglang-0.5.9``)
        base = {n.split("@")[0] for n in names if n.split("@")[1:] in ([], [family])}
        assert {"naive-threshold", "naive-threshold-eager", "fixed-threshold", "always-spec", "steps0-verify",
                "seed-patch", "seed-patch-alloc"} <= base, names
        assert family.startswith("sglang-")
    # the known bugs of the v1 family (not rebased onto 0.5.9: docs/model-0.5.9.md)
    assert all(n in variants_for("0.5.12") for n in ("kv-leak-spec-tail", "stale-graph-padding"))


def test_a_model_that_pads_to_the_largest_graph_is_caught(process: Any) -> None:
    """``tests/mutations.py``'s ``pad-to-largest`` (every replay pads to the largest captured size):
    upstream's ``replay_prepare`` pads to ``capture_bs[bisect_left(capture_bs, raw_bs)]``."""
    from tests.mutations import MUTATIONS

    (mutated,) = [m for m in MUTATIONS if m.name == "mutant-pad-to-largest"]
    d = _seed_sweep(process, mutated)
    assert d.mismatch is not None and d.mismatch.field == "padded_bs", d.mismatch


@pytest.mark.fuzz
def test_the_fuzzer_finds_and_shrinks_the_rebuilt_input_ids(process: Any, tmp_path: Any) -> None:
    """The fuzzer alone finds ``replay-rebuilds-input-ids`` (drawn as the only variant), shrinks the
    workload and saves it as a trace the model replays."""
    from specstate.fuzz.trace import load_trace
    from specstate.model.variant_registry import Variant
    from specstate.oracle.worker.fuzz import fuzz_worker, save_failure

    mutated = Variant("replay-rebuilds-input-ids", "replay copies input_ids rebuilt to the graph's width",
                      overrides={"replay_prepare": _rebuilt_input_ids}, base="naive-threshold")
    res = fuzz_worker(process.release, examples=200, variants=(mutated,), process=process)
    assert res.failure is not None and res.failure.mismatch is not None, res.batches
    assert res.failure.mismatch.field == "shapes.input_ids", res.failure.mismatch
    trace = load_trace(save_failure(res, str(tmp_path)))
    assert trace.variant == "replay-rebuilds-input-ids" and len(trace.actions) <= 12, trace.actions


def test_an_exception_is_compared_by_class_sizes_and_attribute_not_message() -> None:
    from specstate.oracle.worker.signature import comparable, error_signature

    a = error_signature("RuntimeError", "The size of tensor a (160) must match the size of tensor b (2) at "
                        "non-singleton dimension 0", "replay_prepare")
    assert comparable(a) == {"class": "RuntimeError", "stage": "replay_prepare", "sizes": [160, 2]}
    b = error_signature("AttributeError", "'NoneType' object has no attribute 'dtype'", "replay_prepare")
    assert b["attribute"] == ["NoneType", "dtype"] and "sizes" not in b
    reworded = error_signature("RuntimeError", "size of tensor a (160) must match the size of tensor b (2)!", "replay_prepare")
    assert comparable(reworded) == comparable(a)


def test_the_first_disagreement_is_reported_per_field() -> None:
    from specstate.oracle.worker.compare import compare_batch

    batch = {"mode": "DECODE", "seq_lens": [5, 5], "input_ids": [2], "positions": [2], "out_cache_loc": [2],
             "spec": None, "runner": {"name": "target_verify"}}
    model = {"graph": True, "error": None, "padded_bs": 2, "shapes": None}
    upstream = {"graph": True, "error": None, "padded_bs": 2,
                "forward_batch": {"batch_size": 2, "input_ids": [2], "positions": [2], "out_cache_loc": [2]}}
    assert compare_batch(batch, model, upstream) is None
    assert compare_batch(batch, {**model, "graph": False}, upstream).field == "graph"  # type: ignore[union-attr]
    assert compare_batch(batch, {**model, "padded_bs": 4}, upstream).field == "padded_bs"  # type: ignore[union-attr]
    built = {**upstream, "forward_batch": {**upstream["forward_batch"], "positions": [4]}}  # type: ignore[dict-item]
    assert compare_batch(batch, model, built).field == "forward_batch.positions"  # type: ignore[union-attr]


def test_a_write_to_a_worker_that_a_signal_ended_stops_as_interrupted() -> None:
    """``WorkerProcess.run`` writing to a process that SIGINT already ended meets a broken pipe:
    the run stops as interrupted (the CLI's exit 130), as ``OracleProcess.send`` does, never with
    a ``BrokenPipeError`` (the CLI's exit 70, "internal error")."""
    import signal
    import subprocess
    import sys
    import tempfile

    from specstate.oracle.worker.compare import WorkerProcess

    code = "import os, signal; signal.signal(signal.SIGINT, signal.SIG_DFL); os.kill(os.getpid(), signal.SIGINT)"
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.wait(timeout=30) == -signal.SIGINT  # ended by the signal before anything is written
    worker = WorkerProcess.__new__(WorkerProcess)  # the process's plumbing, without upstream's imports
    worker.release, worker.proc, worker.err = "0.5.12", child, tempfile.TemporaryFile(mode="w+")
    worker.figures = {"import_s": 0.0, "run_s": 0.0, "peak_rss_mb": 0.0}
    with pytest.raises(KeyboardInterrupt):
        worker.run([{"rows": 1}])
    worker.close()
