"""Traces: a run as a file that replays on the model (and, through ``integration``, on the
real worker).

A trace holds the format version, the specstate version, the config, the variant name (or
``package.module:Object``), the seed and scenario that produced it (if any), the action list
(with per-step accept lengths and EOS) and the violation it ended with. It round-trips
through JSON and is written atomically (temporary file + ``os.replace``).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specstate import __version__
from specstate.check import RunResult, run_actions
from specstate.errors import TraceFormatError
from specstate.model import Action, SpecConfig, action_from_json, action_to_json

__all__ = ["TRACE_FORMAT", "Trace", "save_trace", "load_trace", "replay_trace", "reproduce_command",
           "trace_from_result", "default_failure_dir"]

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
    def from_json(cls, data: dict[str, Any]) -> "Trace":
        if not isinstance(data, dict) or data.get("format") != TRACE_FORMAT:
            got = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise TraceFormatError(f"Expected a specstate trace with format {TRACE_FORMAT} but got format={got!r}")
        try:
            return cls(config=SpecConfig.from_json(data["config"]), variant=str(data["variant"]),
                       actions=[action_from_json(a) for a in data["actions"]], violation=data.get("violation"),
                       seed=data.get("seed"), scenario=data.get("scenario"),
                       specstate_version=str(data.get("specstate_version", "?")), notes=data.get("notes") or {})
        except KeyError as e:
            raise TraceFormatError(f"Expected key {e} in the trace") from e


def trace_from_result(result: RunResult, *, seed: int | None = None, scenario: str | None = None,
                      config: SpecConfig | None = None) -> Trace:
    """``config``: the config before the variant's changes (what replay starts from)."""
    return Trace(config=config or result.config, variant=result.variant, actions=list(result.actions),
                 violation=result.first.to_json() if result.first else None, seed=seed, scenario=scenario)


def default_failure_dir() -> Path:
    return Path(os.environ.get("SPECSTATE_FAILURE_DIR", "specstate-failures"))


def save_trace(trace: Trace, folder: Path | str | None = None, name: str | None = None) -> Path:
    """Write ``trace`` atomically into ``folder``; the file name says variant and step."""
    folder = Path(folder) if folder is not None else default_failure_dir()
    folder.mkdir(parents=True, exist_ok=True)
    if name is None:
        v = trace.violation
        where = f"{v['invariant']}-step{v['step']}" if v else "ok"
        safe = trace.variant.replace(":", "_").replace("/", "_").replace(".", "_")
        name = f"{safe}-{where}-seed{trace.seed if trace.seed is not None else 'none'}.json"
    path = folder / name
    text = json.dumps(trace.to_json(), indent=1, sort_keys=True) + "\n"
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".trace-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def load_trace(path: Path | str) -> Trace:
    try:
        data = json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise TraceFormatError(f"Expected JSON in {path} but it does not parse: {e}") from e
    return Trace.from_json(data)


def replay_trace(trace: Trace) -> RunResult:
    return run_actions(trace.config, trace.variant, trace.actions)


def reproduce_command(path: Path | str) -> str:
    return f"specstate reproduce {path}"
