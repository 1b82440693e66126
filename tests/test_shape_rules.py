"""The shape rules of ``specstate/model/tensors.py`` against real torch (issue 29).

The model's shape ops run a pure-Python rule instead of torch on the common path; torch runs only
where a rule predicts a failure. Soundness rests on the rules agreeing with torch: a Hypothesis
differential test draws shapes, dtypes and index sizes for every op and compares the rule's
prediction (success and its result, or failure) with the real op's outcome; it catches a
deliberately wrong rule. Then: a failing op raises PyTorch's own error; a rule predicting a failure
torch does not have is an internal error, never a modelled crash; a model run over the known bugs
gives the same crash records under the rules as with ``SPECSTATE_TORCH=always``; and the model's
commands on a correct variant never import torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specstate.model import tensors

DTYPES = st.sampled_from(["int64", "uint8", "bool", "float32", "int32"])
DIM = st.integers(0, 47).map(lambda i: -1 if i == 47 else i % 6)  # 0..5, and -1 (a negative size) 1 in 48
SHAPE = st.lists(DIM, max_size=3).map(tuple)
INT = st.integers(-7, 7)
RULE_SETTINGS = settings(max_examples=250, deadline=None, database=None,
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@st.composite
def related(draw: st.DrawFn, base: tuple[int, ...]) -> tuple[int, ...]:
    """A shape near ``base`` (where the interesting edges are): itself, a suffix, leading 1s, one
    dimension changed or set to 1 or 0, or any shape."""
    how = draw(st.sampled_from(["same", "suffix", "lead1", "change", "one", "any"]))
    if how == "same":
        return base
    if how == "suffix":
        return base[draw(st.integers(0, len(base))):]
    if how == "lead1":
        return (1,) * draw(st.integers(1, 2)) + base
    if how in ("change", "one") and base:
        i = draw(st.integers(0, len(base) - 1))
        return base[:i] + ((draw(DIM) if how == "change" else draw(st.sampled_from([0, 1]))),) + base[i + 1:]
    return draw(SHAPE)


@st.composite
def op_args(draw: st.DrawFn, name: str) -> tuple[Any, ...]:
    """Arguments for op ``name`` (``tensors.OPS``)."""
    a = draw(SHAPE)
    if name == "cat":
        n = draw(st.integers(0, 3))
        shapes = tuple(draw(st.one_of(related(a), st.just((0,)))) for _ in range(n))
        return shapes, draw(st.integers(-3, 3))
    if name == "sliced":
        return a, draw(st.integers(0, 3)), draw(INT)
    if name == "reshape":
        numel = 1
        for d in a:
            numel *= max(d, 0)
        factor = draw(st.sampled_from([d for d in range(1, 7) if numel % d == 0] or [1]))
        dims = draw(st.one_of(st.lists(st.integers(-2, 6), max_size=3).map(tuple),
                              st.permutations([factor, max(numel, 0) // factor]).map(tuple),
                              st.sampled_from([(-1,), (factor, -1), (-1, factor), (0, -1), (-1, -1), ()])))
        return a, dims
    if name == "len":
        return (a,)
    if name == "select":
        return a, tuple(draw(st.lists(INT, max_size=4)))
    if name == "add":
        return a, draw(related(a))
    if name == "copy":  # a None source: a batch field set to None (``merge_batch``'s out_cache_loc)
        return a, draw(st.one_of(related(a), st.none()))
    if name == "grouped_foreach_copy":
        n = draw(st.integers(0, 3))
        dsts = [draw(SHAPE) for _ in range(n)]
        srcs = [draw(st.one_of(related(d), st.none())) for d in dsts]
        if draw(st.integers(0, 9)) == 0:  # lists of different lengths (zip drops the rest)
            srcs.append(draw(SHAPE))
        return tuple(dsts), tuple(srcs)
    if name == "cumsum":
        return a, draw(st.integers(-4, 3))
    if name == "foreach_copy":
        n = draw(st.integers(0, 3))
        dsts = [draw(SHAPE) for _ in range(n)]
        srcs = [draw(related(d)) for d in dsts]
        if draw(st.integers(0, 9)) == 0:  # lists of different lengths
            srcs.append(draw(SHAPE))
        return tuple(dsts), tuple(srcs)
    if name == "assign_prefix":
        stop = draw(INT)
        view = (len(range(a[0])[:stop]),) + a[1:] if a and a[0] >= 0 else a
        return a, stop, draw(related(view))
    raise AssertionError(name)


def outcome(fn: Callable[..., Any], *args: Any, rule: bool = False, **kw: Any) -> tuple[str, Any]:
    """``("ok", result)`` or ``("fails", ...)`` (``"unknown"``: a rule declined). A rule fails
    only by ``_Fails``: anything else it raises is a bug in it, and propagates."""
    if rule:
        try:
            return "ok", fn(*args)
        except tensors._Fails:
            return "fails", None
        except tensors._Unknown:
            return "unknown", None
    try:
        return "ok", fn(*args, **kw)
    except Exception as e:  # torch's own error (or Python's, from inside the op)
        return "fails", type(e).__name__


def compare(name: str, args: tuple[Any, ...], dtype: str) -> None:
    rule, real = tensors.OPS[name]
    got, want = outcome(rule, *args, rule=True), outcome(real, *args, dtype=dtype)
    assert got[0] != "unknown", f"the rule of {name} declined {args!r}: plain small ints are what it is for"
    assert got[0] == want[0] and (got[0] == "fails" or got[1] == want[1]), \
        f"{name}{args!r} ({dtype}): rule {got}, torch {want}"


@pytest.fixture(scope="module")
def torch_imported() -> Iterator[None]:
    import torch  # noqa: F401 - here, not at collection (tests/test_startup.py)

    yield


@pytest.mark.parametrize("name", sorted(tensors.OPS))
def test_each_rule_agrees_with_torch(name: str, torch_imported: None) -> None:
    @RULE_SETTINGS
    @given(st.data())
    def agree(data: st.DataObject) -> None:
        compare(name, data.draw(op_args(name)), data.draw(DTYPES))

    agree()


def test_the_differential_test_catches_a_wrong_rule(torch_imported: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy rule that forgets a size-1 source broadcasts (a plausible slip), and one that
    allows a source of higher rank: each is caught."""
    right = tensors.OPS["copy"][0]  # a None source (the strategy draws them) stays the right rule's: one slip each

    def no_broadcast(dst: tuple[int, ...], src: tuple[int, ...]) -> None:
        if src is None:
            return right(dst, src)
        if tensors._made(dst) != tensors._made(src):
            raise tensors._Fails("differs")

    def rank_blind(dst: tuple[int, ...], src: tuple[int, ...]) -> None:
        if src is None:
            return right(dst, src)
        d, s = tensors._made(dst), tensors._made(src)
        n = min(len(d), len(s))
        if n and tensors._broadcast(d[len(d) - n:], s[len(s) - n:]) != d[len(d) - n:]:
            raise tensors._Fails("differs")

    for wrong in (no_broadcast, rank_blind):
        monkeypatch.setitem(tensors.OPS, "copy", (wrong, tensors._real_copy_into))
        with pytest.raises(AssertionError, match="rule"):
            test_each_rule_agrees_with_torch("copy", None)


@pytest.fixture
def rules_mode() -> Iterator[None]:
    before = tensors.set_torch_mode("rules")
    yield
    tensors.set_torch_mode(before)


def test_a_failing_op_raises_pytorchs_own_error(rules_mode: None, torch_imported: None) -> None:
    import torch

    cases = [(lambda: tensors.cat_rows((2, 4), (3, 5)), lambda: torch.cat([torch.zeros((2, 4)), torch.zeros((3, 5))])),
             (lambda: tensors.foreach_copy_shapes([(160,)], [(10,)]),
              lambda: torch._foreach_copy_([torch.zeros(160)], [torch.zeros(10)])),
             (lambda: tensors.select_rows((4, 2), [0, 4]), lambda: torch.zeros((4, 2))[torch.tensor([0, 4])]),
             (lambda: tensors.leading_len(()), lambda: len(torch.zeros(()))),
             (lambda: tensors.reshaped((6,), (4, -1)), lambda: torch.zeros(6).reshape((4, -1)))]
    for ours, theirs in cases:
        with pytest.raises(Exception) as want:
            theirs()
        for _ in range(2):  # a failure is never remembered: the second call raises again
            with pytest.raises(type(want.value)) as got:
                ours()
            assert str(got.value) == str(want.value)


def test_a_rule_predicting_a_failure_torch_does_not_have_is_an_internal_error(
        rules_mode: None, torch_imported: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from specstate.errors import InternalError
    from specstate.model.runner import guarded

    def always_fails(shape: Any, rows: Any) -> None:
        raise tensors._Fails("wrongly")

    monkeypatch.setitem(tensors.OPS, "select", (always_fails, tensors._real_select_rows))
    with pytest.raises(tensors.ShapeRuleError, match="predicted a failure"):
        tensors.select_rows((5, 3), (1, 2, 3, 4))
    with pytest.raises(InternalError):  # not turned into a modelled crash
        guarded("x.py::f", {}, lambda: tensors.select_rows((5, 4), (1,)))


def test_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    from specstate.errors import InvalidArgument

    before = tensors.set_torch_mode("always")
    try:
        assert tensors.torch_mode() == "always" and tensors.cat_rows((2, 4), (3, 4)) == (5, 4)
        assert "torch" in sys.modules
    finally:
        tensors.set_torch_mode(before)
    with pytest.raises(InvalidArgument):
        tensors.set_torch_mode("sometimes")
    env = dict(os.environ, SPECSTATE_TORCH="sometimes")
    out = subprocess.run([sys.executable, "-c", "import specstate.model.tensors"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode != 0 and "SPECSTATE_TORCH" in out.stderr
    env["SPECSTATE_TORCH"] = "always"
    out = subprocess.run([sys.executable, "-c", "from specstate.model import tensors; print(tensors.torch_mode())"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["always"], out.stderr


def _crashes(variant: str, depth: int) -> list[tuple[Any, ...]]:
    """Every step of a breadth-first search to ``depth`` over the default alphabet from the
    variant's explore config (states not merged: every path, as a fuzz case could take it), and
    each step's crash: class, symbol, message, shapes (``None`` where it did not crash)."""
    from specstate.fuzz.explore import default_alphabet
    from specstate.model import as_variant, initial_state, step
    from specstate.testing._api import explore_config

    v = as_variant(variant)
    ops, alphabet = v.ops(), default_alphabet()
    frontier, seen = [initial_state(v.configure(explore_config(v)))], []
    for _ in range(depth):
        nxt = []
        for s in frontier:
            for a in alphabet(s):
                o = step(s, a, ops)
                c = o.crash
                seen.append(None if c is None else (c.error_class, c.where, c.message, c.signature()))
                if c is None:
                    nxt.append(o.state)
        frontier = nxt
    return seen


@pytest.mark.parametrize("variant, depth", [("naive-threshold", 5), ("seed-stale-spec-info", 5),
                                            ("upstream-adaptive", 4), ("upstream-v23", 4)])
def test_every_step_of_a_search_crashes_alike_under_the_rules_and_always_torch(variant: str, depth: int,
                                                                               rules_mode: None) -> None:
    """Every path of the search (a fuzz case could take any), each step's crash or none: the same."""
    rules = _crashes(variant, depth)
    tensors.set_torch_mode("always")
    assert _crashes(variant, depth) == rules
    if variant in ("naive-threshold", "seed-stale-spec-info"):
        assert any(c is not None and c[0] == "RuntimeError" for c in rules)  # the comparison saw torch's crash


def _undersized(ops: Any, config: Any) -> Any:
    from specstate.model.sglang_0_5_12.policies import shared_target_runners

    return shared_target_runners(config, sized_for=1)


def _crash_cases() -> list[tuple[Any, Any, list[Any]]]:
    from specstate.model import Arrive, SpecConfig, Step, Variant

    small = SpecConfig(speculative_num_steps=2, speculative_eagle_topk=2, speculative_num_draft_tokens=4,
                       disable_batch_threshold=2, cuda_graph_max_bs=4, max_running_requests=8,
                       target_kv_pool_size=512, draft_kv_pool_size=512, cuda_graph_bs_override=(1, 4))
    # the fuzzer's minimal trace of v2-chain-buffers-not-rebuilt (build_tree_kernel_efficient's reshape)
    chain = SpecConfig(speculative_num_steps=1, speculative_eagle_topk=1, speculative_num_draft_tokens=2,
                       disable_batch_threshold=None, cuda_graph_max_bs=1, max_running_requests=2,
                       target_kv_pool_size=4096, draft_kv_pool_size=4096, chunked_prefill_size=64,
                       target_hidden_size=8, draft_hidden_size=6, speculative_adaptive_config=(
                           '{"1": {"candidate_steps": [3]}, "2": {"candidate_steps": [0]}, "ema_alpha": 0.5, '
                           '"update_interval": 1, "warmup_batches": 0}'))
    undersized = Variant("undersized", "shared buffers sized for draft_token_num=1", base="steps0-verify",
                         overrides={"graph_runners": _undersized})
    return [(chain, "v2-chain-buffers-not-rebuilt", [Arrive(1, 1), Step(), Step()]),
            (small, undersized, [Arrive(8, 20), Arrive(8, 20), Step(), Step()])]


@pytest.mark.parametrize("case", range(2))
def test_a_torch_crash_is_the_same_record_under_the_rules_and_always_torch(case: int, rules_mode: None) -> None:
    """Crashes raised by torch at sites a depth-5 search does not reach: the 0.5.17 chain tree's
    reshape, and an undersized shared static buffer's copy (``replay_prepare``)."""
    from specstate.check import run_actions

    config, variant, actions = _crash_cases()[case]
    got = []
    for mode in ("rules", "always"):
        tensors.set_torch_mode(mode)
        r = run_actions(config, variant, actions)
        got.append([(v.invariant, v.field, v.actual, v.shapes, v.step) for v in r.violations])
    assert got[0] == got[1] and got[0] and got[0][0][0] == "worker-crash" and "RuntimeError" in got[0][0][2], got


@pytest.mark.parametrize("variant", ["naive-threshold"])
def test_the_commands_report_the_seed_bug_alike_under_the_rules_and_always_torch(
        variant: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        torch_imported: None) -> None:
    """``specstate run`` (the default scenario) and ``specstate explore``: the same verdict and
    crash record (class, symbol, message, shapes) with the rules as with ``SPECSTATE_TORCH=always``.
    In this process through the CLI's ``main`` (the mode set as the variable sets it at import, and
    the variable set for any worker the search starts); tests/test_startup.py and the no-torch
    probe below run the commands in their own processes."""
    from specstate.cli import main

    monkeypatch.chdir(tmp_path)
    got = {}
    before = tensors.torch_mode()
    try:
        for mode in ("rules", "always"):
            monkeypatch.setenv("SPECSTATE_TORCH", mode)
            tensors.set_torch_mode(mode)
            out = {}
            for cmd in (["run", "--variant", variant, "--json"],
                        ["explore", "--variant", variant, "--depth", "6", "--json", "--quiet"]):
                capsys.readouterr()
                rc = main(cmd)
                doc = json.loads(capsys.readouterr().out)
                doc.pop("elapsed_s", None)
                assert tensors.torch_mode() == mode, (cmd, mode)
                out[cmd[0]] = (rc, doc.get("ok"), doc.get("violation"), doc.get("problems"))
            got[mode] = out
    finally:
        tensors.set_torch_mode(before)
    assert got["rules"] == got["always"]
    violation = got["rules"]["run"][2]
    assert violation["invariant"] == "worker-crash" and violation["actual"].startswith("RuntimeError"), violation


#: runs ``specstate ARGS`` with torch made unimportable in this process and every process it
#: forks (a finder that answers for torch with a loader that raises: ``find_spec`` still finds
#: it, an import fails), and prints the exit code and whether torch was imported
NO_TORCH_PROBE = """
import contextlib, importlib.abc, importlib.machinery, io, json, sys

class NoTorch(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        return importlib.machinery.ModuleSpec(name, self) if name.partition(".")[0] == "torch" else None
    def create_module(self, spec):
        raise ImportError("torch is blocked in this test: " + spec.name)
    def exec_module(self, module):
        raise ImportError("torch is blocked in this test")

sys.meta_path.insert(0, NoTorch())
from specstate.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
    rc = main(sys.argv[1:])
print(json.dumps([rc, "torch" in sys.modules, out.getvalue() + err.getvalue()]))
"""

#: the probe for several commands in one process (each in its own folder, with its own Hypothesis
#: database): the argument is a JSON list of argument lists; prints one result line per command
#: as above, after ``no-torch: ``. Torch stays unimportable throughout, so no command's import hides another's.
NO_TORCH_BATCH = NO_TORCH_PROBE.replace("""with contextlib""", """import os
for i, argv in enumerate(json.loads(sys.argv[1])):
    os.makedirs(str(i)); os.chdir(str(i)); os.environ["SPECSTATE_HYPOTHESIS_DB"] = os.path.abspath("db")
    with contextlib""").replace("""    rc = main(sys.argv[1:])
print(""", """        rc = main(argv)
    os.chdir("..")
    print("no-torch:", end=" ")
    print(""")

LAUNCH = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "4",
          "--speculative-num-draft-tokens", "16", "--cuda-graph-max-bs", "16", "--max-running-requests", "48"]

#: the model's commands on correct variants, small bounds (explore and prove fork workers), and
#: the exit codes that are theirs: 4 (not judged) where a small fuzz budget leaves a witness unreached
NO_TORCH_COMMANDS = [
    (["run"], 0), (["run", "--engine", "sglang-0.5.17"], 0), (["run", "--engine", "sglang-0.5.23"], 0),
    (["explore", "--variant", "fixed-threshold", "--depth", "6", "--jobs", "2"], 0),
    (["explore", "--engine", "sglang-0.5.17", "--depth", "5"], 0),
    (["prove", "--max-bs", "12", "--jobs", "2"], 0), (["prove", "--variant", "upstream-adaptive", "--max-bs", "8"], 0),
    (["fuzz", "--max-examples", "20"], 4), (["fuzz", "--engine", "sglang-0.5.23", "--max-examples", "10"], 4),
    (["check", "--budget", "3", "--max-examples", "20", "--", *LAUNCH], 1),
]


@pytest.fixture(scope="module")
def no_torch_results(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[int, bool, str]]:
    """Every command of ``NO_TORCH_COMMANDS`` through the probe, in one process (one start of the
    interpreter and of specstate instead of ten)."""
    where = tmp_path_factory.mktemp("no-torch")
    env = dict(os.environ)
    env.pop("SPECSTATE_TORCH", None)
    argvs = []
    for argv, _ in NO_TORCH_COMMANDS:
        cut = argv.index("--") if "--" in argv else len(argv)
        argvs.append([*argv[:cut], "--quiet", *argv[cut:]])
    out = subprocess.run([sys.executable, "-c", NO_TORCH_BATCH, json.dumps(argvs)], cwd=where, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [line.split(" ", 1)[1] for line in out.stdout.splitlines() if line.startswith("no-torch: ")]
    assert len(lines) == len(argvs), out.stdout[-3000:]
    return [tuple(json.loads(line)) for line in lines]  # type: ignore[misc]


@pytest.mark.parametrize("i", range(len(NO_TORCH_COMMANDS)), ids=[" ".join(a[:5]) for a, _ in NO_TORCH_COMMANDS])
def test_the_models_commands_on_a_correct_variant_never_import_torch(
        i: int, no_torch_results: list[tuple[int, bool, str]]) -> None:
    """In the command's process and in every process it forks (an import there fails the search)."""
    argv, code = NO_TORCH_COMMANDS[i]
    rc, imported, text = no_torch_results[i]
    assert "torch is blocked" not in text and not imported, (argv, text[-3000:])
    assert rc in (0, code), (argv, text[-3000:])


def test_the_no_torch_probe_can_fail(tmp_path: Any) -> None:
    """The probes above see an import of torch: the seed bug's crash needs torch's error; in the
    batch, after a command that imports nothing of torch (so an earlier command hides nothing)."""
    out = subprocess.run([sys.executable, "-c", NO_TORCH_PROBE, "run", "--variant", "naive-threshold", "--quiet"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600)
    rc, imported, err = json.loads(out.stdout.splitlines()[-1])
    assert rc != 0 and "torch is blocked" in err, (rc, err)
    batch = [["run", "--quiet"], ["run", "--variant", "naive-threshold", "--quiet"]]
    out = subprocess.run([sys.executable, "-c", NO_TORCH_BATCH, json.dumps(batch)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    (rc0, _, text0), (rc1, imported1, err1) = (json.loads(line.split(" ", 1)[1]) for line in out.stdout.splitlines()
                                               if line.startswith("no-torch: "))
    assert rc0 == 0 and "torch is blocked" not in text0, text0
    assert rc1 != 0 and "torch is blocked" in err1 and not imported1, (rc1, err1)
