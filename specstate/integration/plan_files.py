"""Writing a GPU plan's files: the JSON workloads and configs a plan's engines read, and the plan
itself (one ``NAME|driver arguments[|VAR=VALUE ...]`` line per engine, read by ``gpu_run_v17.sh``).
The plan writers of the release folders (``pressure17``, ``reverts17``, ``static17``) build their
lines and objects; this module writes them, the same way for each.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable

__all__ = ["write_json", "write_plan"]


def write_json(folder: str, name: str, obj: Any) -> str:
    """``obj`` as ``folder/name`` (indented JSON); its path."""
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
    return path


def write_plan(folder: str, name: str, lines: Iterable[str]) -> str:
    """The plan ``lines`` as ``folder/name``, one engine a line; its path."""
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path
