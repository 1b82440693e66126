"""The worker oracle's comparison and its process: each model batch against upstream's answer.

Per batch (``batches.py`` builds them): the rows of the ``ForwardBatch`` upstream's ``init_new``
built from it (batch size, ``input_ids``, ``positions``, ``out_cache_loc``) must be the model's; the graph decision (``is_cuda_graph() and can_run``) must be
equal; where the graph runs, the exception must be equal (:func:`signature.comparable`: class, the
sizes a size error names, the type and attribute an ``AttributeError`` names, the function) or both
absent, and every size the model's crash reports (``shapes``: the input_ids buffer slice, the
input_ids rows, tokens per request, raw batch size) must equal upstream's; where both replayed, the
padded batch size must be equal. A model crash in the attention backend's replay metadata is
upstream's backend, which the oracle does not run (``_upstream.py``): there only "``replay_prepare``'s
copies raised nothing" is compared.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from specstate.oracle.worker.signature import comparable
from specstate.oracle._process import end_child

__all__ = ["Mismatch", "compare_batch", "WorkerProcess"]


@dataclass(frozen=True)
class Mismatch:
    """The first field of one batch where the model and upstream disagree."""

    field: str  #: ``graph``, ``error``, ``shapes.<key>``, ``padded_bs``
    model: Any
    upstream: Any
    batch: dict[str, Any] = dataclasses.field(repr=False, default_factory=dict)  # not ``field``: the field above

    def describe(self) -> str:
        b = self.batch
        return (f"{self.field}: model {self.model!r} vs upstream {self.upstream!r} (batch: {b.get('mode')}, "
                f"bs {len(b.get('seq_lens', ()))}, input_ids {b.get('input_ids')}, out_cache_loc {b.get('out_cache_loc')}, "
                f"positions {b.get('positions')}, spec {(b.get('spec') or {}).get('model_class')}, "
                f"runner {(b.get('runner') or {}).get('name')})")


def _backend_crash(expected: dict[str, Any]) -> bool:
    error = expected["error"]
    return error is not None and error["stage"] != "replay_prepare"


def compare_batch(batch: dict[str, Any], expected: dict[str, Any], answer: dict[str, Any]) -> Mismatch | None:
    """The first disagreement of ``expected`` (the model's) with ``answer`` (upstream's), or ``None``."""
    if answer["error"] is not None and answer["error"]["stage"] in ("init_new", "can_run"):
        return Mismatch("error", comparable(expected["error"]), comparable(answer["error"]), batch)
    built = answer.get("forward_batch") or {}
    for key, model in (("batch_size", len(batch["seq_lens"])), ("input_ids", batch["input_ids"]),
                       ("positions", batch["positions"]), ("out_cache_loc", batch["out_cache_loc"])):
        if key in built and built[key] != model:
            return Mismatch(f"forward_batch.{key}", model, built[key], batch)
    if expected["graph"] != answer["graph"]:
        return Mismatch("graph", expected["graph"], answer["graph"], batch)
    if not answer["graph"]:
        return None
    model_error = None if _backend_crash(expected) else comparable(expected["error"])
    if model_error != comparable(answer["error"]):
        return Mismatch("error", model_error, comparable(answer["error"]), batch)
    for key, value in (expected["shapes"] or {}).items():
        theirs = (answer.get("shapes") or {}).get(key)
        if model_error is not None and theirs is not None and theirs != value:
            return Mismatch(f"shapes.{key}", value, theirs, batch)
    if expected["error"] is None and expected["padded_bs"] != answer["padded_bs"]:
        return Mismatch("padded_bs", expected["padded_bs"], answer["padded_bs"], batch)
    return None


def _root() -> str:
    return str(Path(__file__).resolve().parents[3])


class WorkerProcess:
    """One worker-oracle process of one release (``child.py``), kept for many requests."""

    def __init__(self, release: str) -> None:
        from specstate.oracle.wheels import unpacked

        self.release = release
        unpacked(release)  # the pinned tree, checked here: a bad cache is one line before anything runs
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([_root(), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
        self.err = tempfile.TemporaryFile(mode="w+")  # a file, never a pipe nobody reads
        self.proc = subprocess.Popen([sys.executable, "-m", "specstate.oracle.worker.child", release],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True, env=env)
        self.figures: dict[str, float] = {"import_s": 0.0, "run_s": 0.0, "peak_rss_mb": 0.0}

    def run(self, batches: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Upstream's answer for each of ``batches`` (in order)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps({"batches": list(batches)}) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:  # the process had already ended (a signal): its end is read below
            pass
        line = self.proc.stdout.readline()
        if not line:
            from specstate.oracle._core import raise_if_signalled

            raise_if_signalled(self.proc.wait())
            self.err.seek(0)
            raise RuntimeError(f"the worker oracle's process exited {self.proc.returncode}: "
                               f"{self.err.read().strip()[-1500:]}")
        out = json.loads(line)
        if out.get("unavailable"):
            from specstate.oracle.wheels import OracleUnavailable

            raise OracleUnavailable(out["unavailable"])
        self.figures["import_s"] = out["import_s"]
        self.figures["run_s"] += out["run_s"]
        self.figures["peak_rss_mb"] = max(self.figures["peak_rss_mb"], out["peak_rss_mb"])
        answers: list[dict[str, Any]] = out["answers"]
        return answers

    def close(self) -> None:
        end_child(self.proc, self.err, 60)

    def __enter__(self) -> "WorkerProcess":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
