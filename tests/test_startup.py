"""Start-up: the commands that never touch a tensor answer without importing torch (or
Hypothesis, or networkx), and a Ctrl-C while specstate starts ends with its one line.

Each case runs in a fresh interpreter (``subprocess``): ``sys.modules`` of this test process
already holds torch. ``docs/performance.md`` has the times."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.signals_default import default_sigint

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "hypothesis")  # networkx: `graph` reads it with its arguments (light next to torch)

#: argv -> the exit code; every one answers from the arguments or the schema alone
CASES = [
    (["--version"], 0), (["--help"], 0), (["variants"], 0), (["invariants"], 0), (["scenarios"], 0),
    (["prove", "--help"], 0), (["fuzz", "--help"], 0), (["explore", "--help"], 0), (["graph", "--help"], 0),
    (["prove", "--max-bs", "0"], 2), (["explore", "--bogus"], 2), (["fuzz", "--profile", "nope"], 2),
    (["reproduce", "{trace}"], 2), (["minimize", "{trace}"], 2), (["reproduce", "{config}"], 2),
    (["graph", "--trace", "{trace}", "--out", "g.dot"], 2), (["conform", "{recording}"], 2),
    (["reproduce", "missing.json"], 2),
]

PROBE = """
import contextlib, io, json, sys
from specstate.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    rc = main(sys.argv[1:])
print(json.dumps([rc, [m for m in {heavy!r} if m in sys.modules]]))
"""


def _files(tmp: Path) -> dict[str, str]:
    trace = {"format": 1, "specstate_version": "0.1.0", "variant": "naive-threshold", "seed": 1, "scenario": None,
             "config": {}, "violation": None, "notes": {}, "actions": [{"op": "arrive", "prompt_len": "3"}]}
    (tmp / "t.json").write_text(json.dumps(trace))
    (tmp / "c.json").write_text(json.dumps({**trace, "actions": [], "config": {"speculative_num_steps": "2"}}))
    with gzip.open(tmp / "r.jsonl.gz", "wt") as f:
        f.write('{"kind": "header", "format": "nope"}\n')
    return {"trace": str(tmp / "t.json"), "config": str(tmp / "c.json"), "recording": str(tmp / "r.jsonl.gz")}


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.mark.parametrize("argv, code", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_answers_without_importing_torch(argv: list[str], code: int, tmp_path: Path) -> None:
    args, rc, heavy = _probe(argv, HEAVY, tmp_path)
    assert (rc, heavy) == (code, []), (args, rc, heavy)


def _probe(argv: list[str], modules: tuple[str, ...], tmp_path: Path) -> tuple[list[str], int, list[str]]:
    """``specstate ARGV`` in a child (the files of ``_files`` put in): its args, exit code and which
    of ``modules`` it imported."""
    args = [a.format(**_files(tmp_path)) for a in argv]
    out = subprocess.run([sys.executable, "-c", PROBE.format(heavy=modules), *args], cwd=tmp_path, env=_env(),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rc, heavy = json.loads(out.stdout.splitlines()[-1])
    return args, rc, heavy


#: what a trace (or its config) refused by the schema must not import: pydantic's model layer and
#: the plugin scan its first model runs (``importlib.metadata`` over every installed distribution),
#: and the modules that replay a trace; the schema is pydantic-core's alone (``schema/_config.py``)
SCHEMA_ONLY = ("pydantic", "importlib.metadata", "specstate.fuzz.trace", "specstate.check", "specstate.report")


@pytest.mark.parametrize("argv", [["reproduce", "{trace}"], ["reproduce", "{config}"]], ids=["trace", "config"])
def test_a_schema_error_imports_only_the_schema(argv: list[str], tmp_path: Path) -> None:
    """A schema error on a bad trace answers in <= 0.1x the time of ``import torch`` (issue 29);
    pydantic's model layer alone was about half of it."""
    args, rc, heavy = _probe(argv, SCHEMA_ONLY, tmp_path)
    assert (rc, heavy) == (2, []), (args, rc, heavy)


def test_the_model_imports_torch_only_where_a_shape_op_fails() -> None:
    """Steps whose shape ops succeed run the shape rules alone (``specstate/model/tensors.py``);
    a failing op imports torch for its error."""
    probe = ("import sys\nfrom specstate.model import get_variant, SpecConfig, initial_state, Arrive, Step, step\n"
             "from specstate.model import tensors\n"
             "v = get_variant('fixed-threshold'); s = initial_state(SpecConfig())\n"
             "before = 'torch' in sys.modules\n"
             "for a in (Arrive(4, 4), Step(), Step(), Step()):\n    s = step(s, a, v.ops()).state\n"
             "after = 'torch' in sys.modules\n"
             "try:\n    tensors.cat_rows((2, 4), (3, 5))\nexcept RuntimeError:\n    pass\n"
             "print(before, after, 'torch' in sys.modules)")
    env = {k: v for k, v in _env().items() if k != "SPECSTATE_TORCH"}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["False", "False", "True"], out.stderr


@pytest.mark.slow  # 8 CPU s: four starts of a search, each signalled at another point of its start-up
def test_ctrl_c_while_starting_ends_with_one_line(tmp_path: Path) -> None:
    """SIGINT at 0.3 s .. : wherever start-up is (imports, the parser, the first import of
    torch inside the command), the answer is specstate's line and exit 130, no traceback. (A
    signal before the interpreter has imported ``site`` is Python's own start, not specstate's.)"""
    for delay in (0.3, 0.8, 1.5, 3.0):
        # depth 12: a search that outlasts the last delay (the default depth 8 ended in 2.5 s once)
        p = subprocess.Popen([sys.executable, "-m", "specstate", "explore", "--variant", "naive-threshold", "--quiet",
                              "--depth", "12"],
                             cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=default_sigint)
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
        if p.returncode == 0 or "init_import_site" in err:  # finished first / not started yet
            continue
        # 130, or ended by SIGINT itself (-2; a shell shows both as 130): about 1 interrupted
        # start in 10 ends so after specstate's line, since stop 22 at least. Cause not pinned;
        # probably a Ctrl-C landing in C code that runs Python source during ``import torch``,
        # which leaves CPython's "unhandled KeyboardInterrupt" flag set (it then ends by SIGINT)
        assert p.returncode in (130, -signal.SIGINT) and "Traceback" not in err, (delay, p.returncode, err)
        assert err.strip().splitlines()[-1].startswith("specstate: interrupted"), err


#: collects the whole suite in this child and names, per test module, the heavy modules its
#: collection imported first (a module-level import of torch, or of a module importing it)
COLLECT_PROBE = """
import json, sys
import pytest

class Probe:
    first = {}

    def pytest_collectreport(self, report):
        for m in ("torch", "specstate.integration.sglang_capture"):
            if m in sys.modules and m not in self.first:
                self.first[m] = report.nodeid

rc = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "tests"], plugins=[Probe()])
print(json.dumps([int(rc), Probe.first]))
"""


def test_collecting_the_suite_does_not_import_torch() -> None:
    """``pytest --collect-only`` imports neither torch nor a module that needs it at import: heavy
    imports belong inside the tests and fixtures that use them (issue 29; the time is in
    ``docs/performance.md``)."""
    out = subprocess.run([sys.executable, "-c", COLLECT_PROBE], cwd=ROOT, env=_env(), capture_output=True, text=True,
                         timeout=300)
    rc, first = json.loads(out.stdout.splitlines()[-1])
    assert rc == 0, out.stdout[-2000:]
    assert first == {}, f"collecting imported (heavy module -> the collector that imported it first): {first}"
