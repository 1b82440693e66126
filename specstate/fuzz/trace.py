"""Traces: a run as a file that replays on the model (and, through ``integration``, on the
real worker).

A trace holds the format version, the specstate version, the config, the variant name (or
``package.module:Object``), the seed and scenario that produced it (if any), the action list
(with per-step accept lengths and EOS) and the violation it ended with. It round-trips
through JSON; reading validates it against ``specstate.schema`` first.

Writing loses nothing: a trace goes to a temporary file in the target folder (named with the
writer's pid) and is then *linked* into place, which never replaces an existing file. The
name says variant, invariant, step and seed, or, for an unseeded run, a hash of the trace's
text, so the same trace always gets the same name and a different one never takes it; a
name already holding other bytes gets the hash appended. Temporaries a killed writer left
behind are removed by the next write into that folder. Names are built from sanitised
parts only (``[A-Za-z0-9_-]``), never from a trace's text as it stands.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specstate import __version__
from specstate.errors import TraceFormatError, UsageError
from specstate.model import Action, SpecConfig, action_to_json
from specstate.report import reproduce_command  # noqa: F401  (re-exported: it lived here)

if TYPE_CHECKING:  # the model's operations are imported where a trace is replayed, not where it is read
    from specstate.check import RunResult

__all__ = ["TRACE_FORMAT", "Trace", "save_trace", "load_trace", "replay_trace", "reproduce_command",
           "trace_from_result", "default_failure_dir", "failure_dir", "safe_part", "trace_text", "import_allowed",
           "require_import_permission"]

TRACE_FORMAT = 1


@dataclass
class Trace:
    config: SpecConfig
    variant: str
    actions: list[Action]
    violation: dict[str, Any] | None = None
    seed: int | None = None
    scenario: str | None = None
    specstate_version: str = __version__
    format: int = TRACE_FORMAT
    notes: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format, "specstate_version": self.specstate_version,
            "variant": self.variant, "seed": self.seed, "scenario": self.scenario,
            "config": self.config.to_json(), "violation": self.violation, "notes": self.notes,
            "actions": [action_to_json(a) for a in self.actions],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], source: str = "trace") -> "Trace":
        """A trace from parsed JSON, validated by ``specstate.schema``."""
        from specstate.schema import trace_from_data

        return cls._from_data(trace_from_data(data, source))

    @classmethod
    def _from_data(cls, d: Any) -> "Trace":
        return cls(config=d.config, variant=d.variant, actions=d.actions, violation=d.violation, seed=d.seed,
                   scenario=d.scenario, specstate_version=d.specstate_version, notes=d.notes)


def trace_from_result(result: RunResult, *, seed: int | None = None, scenario: str | None = None,
                      config: SpecConfig | None = None) -> Trace:
    """``config``: the config before the variant's changes (what replay starts from)."""
    return Trace(config=config or result.config, variant=result.variant, actions=list(result.actions),
                 violation=result.first.to_json() if result.first else None, seed=seed, scenario=scenario)


def default_failure_dir() -> Path:
    return Path(os.environ.get("SPECSTATE_FAILURE_DIR", "specstate-failures"))


#: the failure folders ``failure_dir`` made in this process (innermost first): a refused command
#: removes those still empty (``remove_empty_failure_dirs``), so it leaves no empty folder behind
CREATED: list[Path] = []


def remove_empty_failure_dirs() -> None:
    """Remove the folders ``failure_dir`` made that nothing was written into."""
    while CREATED:
        try:
            CREATED.pop(0).rmdir()
        except OSError:  # not empty (a trace was written), or gone: kept as it is
            pass


def failure_dir(folder: Path | str | None = None) -> Path:
    """``folder`` (default ``default_failure_dir()``), created; a path that is a file, or a
    folder that cannot be made, is a ``UsageError`` before any work is done."""
    if folder is not None and not str(folder).strip():
        raise UsageError(f"Expected --failures to be a folder but got {str(folder)!r} (an empty path; leave the option "
                         f"out for {default_failure_dir()})")
    p = Path(folder) if folder is not None else default_failure_dir()
    if p.exists() and not p.is_dir():
        raise UsageError(f"Expected --failures to be a folder but {p} is a file")
    new = [d for d in (p, *p.parents) if not d.exists()]
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"Expected --failures to be a folder specstate can create but {p}: {e.strerror or e}") from None
    CREATED.extend(d for d in new if d not in CREATED)
    if not os.access(p, os.W_OK | os.X_OK):
        raise UsageError(f"Expected --failures to be a writable folder but {p} is not writable")
    try:  # root passes os.access everywhere (/sys, a read-only mount): try it
        fd, probe = tempfile.mkstemp(dir=p, prefix=f".trace-{os.getpid()}-probe-", suffix=".json")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise UsageError(f"Expected --failures to be a writable folder but {p}: {e.strerror or e}") from None
    return p


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def safe_part(text: object, limit: int = 80) -> str:
    """``text`` as a file-name part: runs of anything but ``[A-Za-z0-9_-]`` become ``_``."""
    return _UNSAFE.sub("_", str(text))[:limit].strip("_") or "x"


def trace_text(trace: Trace) -> str:
    return json.dumps(trace.to_json(), indent=1, sort_keys=True) + "\n"


def _default_name(trace: Trace, digest: str) -> str:
    v = trace.violation
    where = f"{safe_part(v.get('invariant'))}-step{safe_part(v.get('step'))}" if isinstance(v, dict) else "ok"
    tag = f"seed{trace.seed}" if type(trace.seed) is int and trace.seed >= 0 else digest
    return f"{safe_part(trace.variant)}-{where}-{tag}.json"


_TMP = re.compile(r"^\.trace-(\d+)-.*\.json$")


def _sweep_temporaries(folder: Path) -> None:
    """Remove ``.trace-PID-*.json`` files whose writer is gone (killed mid-write)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for n in names:
        m = _TMP.match(n)
        if m is None or int(m.group(1)) == os.getpid():
            continue
        try:
            os.kill(int(m.group(1)), 0)
            alive = True
        except ProcessLookupError:
            alive = False
        except OSError:  # another user's live process
            alive = True
        stale = time.time() - _mtime(folder / n) > 3600
        if not alive or stale:
            try:
                os.unlink(folder / n)
            except OSError:
                pass


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return time.time()


def _same_bytes(path: Path, data: bytes) -> bool:
    try:
        return path.read_bytes() == data
    except OSError:
        return False


def _publish(tmp: str, folder: Path, name: str, data: bytes, digest: str) -> Path:
    """Link ``tmp`` to ``folder/name`` without replacing anything (see the module doc)."""
    stem = name[:-5] if name.endswith(".json") else name
    for candidate in [name, f"{stem}-{digest}.json"] + [f"{stem}-{digest}-{i}.json" for i in range(2, 100)]:
        path = folder / candidate
        try:
            os.link(tmp, path)
            return path
        except FileExistsError:
            if _same_bytes(path, data):
                return path
    raise UsageError(f"Expected a free file name for the trace in {folder} but {name} and 99 variants are taken")


def save_trace(trace: Trace, folder: Path | str | None = None, name: str | None = None, *,
               overwrite: bool = False) -> Path:
    """Write ``trace`` into ``folder`` (see the module doc). ``name``: the file name (a
    sanitised stem is kept; ``.json`` added); ``overwrite``: replace a file of that name
    (``specstate minimize --out``), else a taken name gets the trace's hash appended."""
    folder = failure_dir(folder)
    text = trace_text(trace)
    data = text.encode()
    digest = hashlib.sha256(data).hexdigest()[:10]
    if name is None:
        name = _default_name(trace, digest)
    else:
        name = safe_part(name[:-5] if name.endswith(".json") else name, limit=120) + ".json"
    _sweep_temporaries(folder)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".trace-{os.getpid()}-", suffix=".json")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        if overwrite:
            os.replace(tmp, folder / name)
            return folder / name
        return _publish(tmp, folder, name, data, digest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def load_trace(path: Path | str) -> Trace:
    """Read and validate a trace file (``specstate.schema``): one ``TraceFormatError`` line
    naming the file and the JSON path for anything wrong."""
    from specstate.schema import read_trace

    return Trace._from_data(read_trace(path))


def import_allowed(trace: Trace, allowed: bool = False) -> bool:
    """Whether replaying ``trace`` may load its variant (the one rule:
    ``specstate.model.variant_registry.variant_import_allowed``)."""
    from specstate.model.variant_registry import variant_import_allowed

    return variant_import_allowed(trace.variant, allowed)


def require_import_permission(trace: Trace, source: object, allowed: bool = False) -> None:
    """A trace naming ``package.module:Object`` replays only with permission to import (run)
    that module (the one guard: ``specstate.model.variant_registry.require_variant_import``)."""
    from specstate.model.variant_registry import require_variant_import

    require_variant_import(trace.variant, source, allowed)


def replay_trace(trace: Trace, *, allow_variant_import: bool = False) -> RunResult:
    """Replay ``trace`` on the model; a user's variant needs ``allow_variant_import``
    (``require_import_permission``)."""
    from specstate.check import run_actions

    require_import_permission(trace, "the trace", allow_variant_import)
    return run_actions(trace.config, trace.variant, trace.actions)
