"""A ratchet on the shared code naming releases (issue 38: "no module outside the release folders
imports one or names one"): the modules of ``specstate/`` outside the release folders
(``specstate/model/sglang_X_Y_Z/``, ``specstate/integration/sglang_X_Y_Z/``) that import a release
folder or name a release in code, counted, with the list printed (``pytest -s`` or ``-rA``).

What counts, read from the AST (docstrings and comments do not count; code inside functions and
under ``TYPE_CHECKING`` does):

- an import of a release folder (``specstate.model.sglang_0_5_17.start``, ``from specstate.model
  import sglang_0_5_23``);
- a string in code naming a registered release (``"sglang-0.5.17"``, ``"0.5.12"``: every release of
  the family registry, ``Family.source_release`` and ``Family.releases``) or a release folder
  (``"specstate.model.sglang_0_5_12.worker"``);
- a name spelled with a release (``FAMILY_0_5_23``, ``sglang_0_5_9``).

The ratchet was set at 41 modules / 89 lines (issue 38) and only went down: the ``Release`` layer
(one object per release folder) took it to 39 / 88, the operations' defaults, the overlap start and
the launch rules asked of the releases to 33 / 70, then the oracle's per-release modules, the vLLM
release, the internal shims, the wheel pins, the messages and the old conformance entry moving into
the release folders or asking the ``Release`` objects took it to 0 / 0: the release folders answer
for themselves. The pins stay at 0: a change that names a release in shared code fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from specstate.model.families import family_names, get_family

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "specstate"

#: the ratchet: modules and code lines outside the release folders that name a release
MAX_MODULES = 0
MAX_LINES = 0

_FOLDER = re.compile(r"[a-z]+(?:_\d+)+")  #: a release folder, of any engine: ``sglang_0_5_17``
_IMPORTED = re.compile(r"\bspecstate\.(?:model|integration)\.[a-z]+(?:_\d+)+\b")
_SPELLED = re.compile(r"_\d+_\d+_\d+")  #: a release in a name or a dotted path: ``sglang_0_5_17``, ``FAMILY_0_5_23``


def _release_pattern() -> re.Pattern[str]:
    releases = {r for n in family_names() for r in (get_family(n).source_release, *get_family(n).releases)}
    alternatives = "|".join(re.escape(r) for r in sorted(releases, key=len, reverse=True))
    return re.compile(rf"(?<![\w.])(?:{alternatives})(?![\w]|\.\d)")


def _in_release_folder(path: Path) -> bool:
    parts = path.relative_to(PKG).parts
    return len(parts) >= 2 and parts[0] in ("model", "integration") and bool(_FOLDER.fullmatch(parts[1]))


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            out.add(id(body[0].value))
    return out


def _why(node: ast.AST, docstrings: set[int], release: re.Pattern[str]) -> str | None:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        targets = [a.name for a in node.names]
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            targets = [base] + [f"{base}.{t}" for t in targets]
        return "import" if any(_IMPORTED.search(t) for t in targets) else None
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
        return "string" if release.search(node.value) or _SPELLED.search(node.value) else None
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    return "name" if name is not None and _SPELLED.search(name) else None


def release_naming() -> dict[str, dict[int, set[str]]]:
    """Module path -> {line: what names a release there}, for every module outside the release folders."""
    release = _release_pattern()
    out: dict[str, dict[int, set[str]]] = {}
    for path in sorted(PKG.rglob("*.py")):
        if _in_release_folder(path):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = _docstrings(tree)
        lines: dict[int, set[str]] = {}
        for node in ast.walk(tree):
            why = _why(node, docstrings, release)
            if why is not None:
                lines.setdefault(getattr(node, "lineno", 0), set()).add(why)
        if lines:
            out[path.relative_to(ROOT).as_posix()] = lines
    return out


def _listing(found: dict[str, dict[int, set[str]]]) -> str:
    return "\n".join(f"  {m}: {len(ls)} line(s), {', '.join(sorted(set().union(*ls.values())))} "
                     f"(lines {', '.join(map(str, sorted(ls)))})" for m, ls in found.items())


def test_the_shared_code_names_no_more_releases_than_the_pin() -> None:
    found = release_naming()
    modules, lines = len(found), sum(len(ls) for ls in found.values())
    listing = _listing(found)
    print(f"\n{modules} modules, {lines} code lines outside the release folders name a release:\n{listing}")
    assert modules <= MAX_MODULES and lines <= MAX_LINES, (
        f"{modules} modules / {lines} lines name a release (pins {MAX_MODULES} / {MAX_LINES}): ask the release "
        f"(its Family, its adapter, an operation) instead of naming it\n{listing}")
    assert (modules, lines) == (MAX_MODULES, MAX_LINES), (
        f"fewer release names than the pins ({modules} / {lines}): lower MAX_MODULES / MAX_LINES to them")


def test_the_count_sees_each_kind() -> None:
    """Each kind is counted where it is written, and a docstring is not."""
    release = _release_pattern()
    tree = ast.parse('"""sglang 0.5.17 in a docstring"""\n'
                     'from specstate.model.sglang_0_5_17.start import starts\n'
                     'from specstate.model import sglang_0_5_23\n'
                     'NAME = "sglang-0.5.12"\n'
                     'x = FAMILY_0_5_23\n'
                     'VERSION = "3.0.0"\n')
    docstrings = _docstrings(tree)
    kinds = {}
    for node in ast.walk(tree):
        why = _why(node, docstrings, release)
        if why:
            kinds.setdefault(node.lineno, set()).add(why)
    assert kinds == {2: {"import"}, 3: {"import"}, 4: {"string"}, 5: {"name"}}
    assert not _in_release_folder(PKG / "model/state.py") and _in_release_folder(PKG / "integration/sglang_0_5_17/x.py")
