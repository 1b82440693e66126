"""No import circle in ``specstate/`` (docs/architecture.md, "No import circle").

Every ``import`` / ``from ... import`` of a ``specstate`` module counts, at the top of a file or
inside a function, under ``TYPE_CHECKING`` too (as an import map draws it). Two levels:

- files: no two modules that import each other, directly or through others;
- rooms (a first-level folder of ``specstate/`` or a top-level module): no two rooms that import
  each other, which is what makes an arrow run back up.

The circles still there are listed, each with why (``KNOWN_*``); one that goes away or a new one
fails the test, so the list stays true.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "specstate"

#: none left: the v2 conformance takes compare / load_records from integration/compare.py
KNOWN_FILE_CIRCLES: set[frozenset[str]] = set()
#: none left: the schema owns the JSON readers (config_from_data, action_from_data) and the model
#: checks a user variant's config_changes itself (model/config.py::check_changes)
KNOWN_ROOM_CIRCLES: set[frozenset[str]] = set()


def _modules() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(_parsed(path)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def _circles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: set[frozenset[str]] = set()
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = set()
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.add(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    out.add(frozenset(comp))
    return out


def _room(name: str, path: Path) -> str:
    parts = name.split(".")
    if len(parts) > 2 or path.name == "__init__.py" and len(parts) == 2:
        return "/".join(parts[:2]) + "/"
    return str(path.relative_to(ROOT))


@functools.cache
def _parsed(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once per process (the tests below read the same files; the
    module is one scheduling unit, ``tests/conftest.py::SHARED_FIXTURE_UNITS``)."""
    return ast.parse(path.read_text(encoding="utf-8"))


@functools.cache
def _graphs() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """The file and room import maps, made once per process (the tests only read them)."""
    mods = _modules()
    files = {name: _imports(name, path, mods) for name, path in mods.items()}
    rooms: dict[str, set[str]] = {_room(n, p): set() for n, p in mods.items()}
    for name, targets in files.items():
        for t in targets:
            a, b = _room(name, mods[name]), _room(t, mods[t])
            if a != b:
                rooms[a].add(b)
    return files, rooms


def test_the_import_map_reads_the_package() -> None:
    files, rooms = _graphs()
    assert "specstate.model.ops" in files and "specstate.model.scheduler" in files["specstate.model.ops"]
    assert "specstate/cli/" in rooms and "specstate/graph/" in rooms["specstate/cli/"]


def test_no_library_imports_command_code() -> None:
    """Every command module is ``specstate/cli/``: nothing outside it imports it but
    ``python -m specstate`` (a deprecation shim names its new path as a string, which is no import)."""
    files, _ = _graphs()
    up = {(a, b) for a, targets in files.items() if not (a + ".").startswith("specstate.cli.") and a != "specstate.__main__"
          for b in targets if (b + ".").startswith("specstate.cli.")}
    assert up == set()


def test_the_circle_finder_finds_a_planted_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {frozenset("abc")}
    assert _circles({"a": {"b"}, "b": set()}) == set()


def test_no_file_imports_itself_through_others() -> None:
    files, _ = _graphs()
    assert _circles(files) == KNOWN_FILE_CIRCLES


def test_no_two_rooms_import_each_other() -> None:
    _, rooms = _graphs()
    assert _circles(rooms) == KNOWN_ROOM_CIRCLES


#: none left (sglang_patch.fixed_fallback is five named steps now; test_integration_cpu.py::test_fixed_fallback_bookkeeping runs it on fakes)
LONG_KNOWN: set[str] = set()


def test_no_function_is_longer_than_60_lines() -> None:
    """``../shared/STYLE.md``'s small functions, over the package and the benchmarks."""
    long = set()
    for path in sorted(PKG.rglob("*.py")) + sorted((ROOT / "benchmarks").rglob("*.py")):
        for node in ast.walk(_parsed(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 60:
                long.add(f"{path.relative_to(ROOT)}::{node.name}")
    assert long == LONG_KNOWN
