"""Every comparison of a batch size in the model goes through ``specstate.model.bs_compare``
(what ``specstate prove``'s intervals rest on, ``docs/prove.md``), and the recorder notes it."""

from __future__ import annotations

import ast
from pathlib import Path

from specstate.model import bs_compare
from specstate.model.bs_compare import at_most, floor_key, padded, recording, room

MODEL = Path(bs_compare.__file__).parent

#: names that hold a batch size (or a constant one is compared with) in the model's code
BS_NAMES = {"batch_size", "bs", "raw_bs", "padded_bs", "decode_bs", "max_bs", "running_bs", "initial_bs", "last_bs",
            "disable_batch_threshold", "max_running_requests", "capture_bs", "cuda_graph_bs", "cuda_graph_max_bs"}

#: comparisons that stay as they are, by file and source text, each with why the intervals need
#: nothing from them
ALLOWED = {
    ("config.py", "bs <= cuda_graph_max_bs"): "builds the capture list (a constant, recorded by padded())",
    ("config.py", "cuda_graph_max_bs not in capture"): "builds the capture list",
    ("config.py", "bs <= self.max_running_requests"): "builds the capture list",
    ("config.py", "max(base) > self.max_running_requests"): "builds the capture list",
    ("config.py", "self.disable_batch_threshold is None"): "no threshold: not a batch size",
    ("config.py", "self.disable_batch_threshold is not None"): "validation",
    ("config.py", "self.cuda_graph_max_bs >= 1"): "validation",
    ("config.py", "self.max_running_requests >= 1"): "validation",
    ("config.py", "self.disable_batch_threshold >= 0"): "validation",
    ("replay.py", "bs != fb.batch_size"): "padded vs raw: the graph class (captured or padded) of the recorded list",
    ("replay.py", "bs * runner.num_tokens_per_bs != fb.input_ids[0]"): "tokens vs the padded size's tokens: the "
                                                                       "graph class and the accepts",
    ("scheduler.py", "last.batch_size < last_bs"): "two batch sizes: did the batch shrink",
    ("scheduler.py", "tx.state.running.batch_size < initial_bs"): "two batch sizes: did the batch shrink",
    ("scheduler.py", "len(keep) == batch.batch_size"): "two batch sizes: does the filter keep every row",
    ("scheduler.py", "len(keep) == s.running.batch_size"): "two batch sizes (0.5.23's filter of finished rows): "
                                                           "does the filter keep every row",
    ("scheduler.py", "allocatable_reqs(s, s.running.batch_size) <= 0"): "room() recorded max_running_requests",
    ("admission.py", "allocatable_reqs(s, s.running.batch_size) <= 0"): "0.5.9's schedule_prefill, the same early "
                                                                        "exit: room() recorded max_running_requests",
    ("adaptive.py", "self.cuda_graph_bs is not None"): "no routing list: not a batch size",
    ("adaptive.py", "self.cuda_graph_bs is None"): "no routing list: not a batch size",
    ("identities.py", "tuple(info.future_indices) != (s.running.batch_size,)"): "an identity of two row counts",
    ("variants.py", "params.steps_for_batch(bs) == 0"): "switch_threshold: fuzz steering, not a step",
    ("variants.py", "bs > 1"): "switch_threshold: fuzz steering, not a step",
}


def _mentions_bs(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id in BS_NAMES:
            return True
        if isinstance(n, ast.Attribute) and n.attr in BS_NAMES:
            return True
    return False


def _unrouted(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        bisects = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.startswith("bisect")
        if (isinstance(node, ast.Compare) and _mentions_bs(node)) or bisects:
            text = ast.unparse(node)
            if (path.name, text) not in ALLOWED:
                found.append(f"{path.parent.name}/{path.name}:{node.lineno}: {text}")
    return found


def _proved_by_interval(path: Path) -> bool:
    """A module of a model ``specstate prove`` runs on: not another engine's own state machine
    (``vllm_X_Y_Z/``: ``prove`` refuses the vLLM family, its batch sizes are never intervals)."""
    return not any(part.startswith("vllm_") for part in path.relative_to(MODEL).parts)


def test_every_batch_size_comparison_in_the_model_goes_through_bs_compare() -> None:
    found = [line for p in sorted(MODEL.rglob("*.py")) if p.name != "bs_compare.py" and _proved_by_interval(p)
             for line in _unrouted(p)]
    assert found == [], "compare batch sizes through specstate.model.bs_compare (docs/prove.md):\n" + "\n".join(found)


def test_the_scan_finds_a_raw_comparison(tmp_path: Path) -> None:
    (tmp_path / "x.py").write_text("import bisect\ndef f(batch, c):\n    if batch.batch_size <= 3:\n"
                                   "        return bisect.bisect_left(c, len(batch.rids))\n")
    assert [line.split(": ", 1)[1] for line in _unrouted(tmp_path / "x.py")] == [
        "batch.batch_size <= 3", "bisect.bisect_left(c, len(batch.rids))"]


def test_the_helpers_compute_and_record() -> None:
    assert at_most(5, 5) and not at_most(6, 5)
    assert (padded((1, 2, 4, 8), 3), padded((1, 2, 4, 8), 8), padded((1, 2, 4, 8), 9)) == (4, 8, None)
    assert (floor_key((1, 6, 17), 5), floor_key((1, 6, 17), 6), floor_key((2, 6), 1)) == (1, 6, 2)
    assert room(8, 3) == 5
    with recording() as rec:
        at_most(2, 5)
        padded((1, 4), 2)
        floor_key((1, 6), 3)
        room(48, 2)
    assert rec.constants == {5, 0, 5, 47} and rec.captures == {(1, 4)}
    with recording() as outer:
        with recording() as inner:
            at_most(1, 9)
        at_most(1, 7)
    assert inner.constants == {9} and outer.constants == {7}
