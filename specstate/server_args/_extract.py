"""Every flag a release's ``ServerArgs.add_cli_args`` declares, read from its source by ``ast``.

Owns: the extraction of the flag list (names, arity, value type, literal choices) from
``sglang/srt/server_args.py`` of one release, without importing sglang (it needs a GPU stack).
Two shapes of declaration are read:

- ``parser.add_argument("--x", "--alias", type=int, nargs="+", action=..., choices=[...])`` calls
  anywhere in ``ServerArgs.add_cli_args`` (0.5.12 declares every flag so; 0.5.17 a few);
- 0.5.17's annotated fields, ``name: A[T, "help"]`` or ``A[T, Arg(choices=..., aliases=...,
  cli_name=..., nargs=..., action=..., no_cli=...)]``, which 0.5.17's
  ``add_cli_args_from_dataclass`` (``arg_groups/arg_utils.py``) turns into ``add_argument`` calls
  (a bool: ``store_true``; a ``List[X]``: ``nargs="+"``; a ``Literal``: its values as choices).
  0.5.23 declares the same annotated fields, not in ``ServerArgs`` itself but in the namespace
  classes of ``arg_groups/fields/*.py`` (``Spec``, ``Memory``, ...) that its ``server_args.py``
  lists in ``_INPUT_NAMESPACES`` and merges into ``ServerArgs`` (``collect_input_fields``):
  ``extract_flags_from`` reads those classes too, in that order.

The result is the data file ``flags-<release>.json`` beside this module (``python -m
specstate.server_args._extract SERVER_ARGS_PY RELEASE`` writes it); ``tests/test_server_args_source.py``
extracts again from the release's source and compares. Only what parsing a command line needs
is kept: which tokens a flag takes and, for the simple types, what a value must look like.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["extract_flags", "extract_flags_from", "namespace_classes", "ZERO_ARITY_ACTIONS"]

#: actions that take no value (argparse's own, and sglang's deprecation wrappers, which pass
#: ``nargs=0``: ``DeprecatedAction``, ``DeprecatedStoreTrueAction``, ``DeprecatedStoreConstAction``)
ZERO_ARITY_ACTIONS = frozenset({"store_true", "store_false", "store_const", "count", "BooleanOptionalAction",
                                "DeprecatedAction", "DeprecatedStoreTrueAction", "DeprecatedStoreConstAction"})
_SIMPLE_TYPES = frozenset({"int", "float", "str", "human_readable_int"})


def _name(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _literal(node: ast.AST | None) -> Any:
    try:
        return ast.literal_eval(node) if node is not None else None
    except (ValueError, SyntaxError, TypeError):
        return None


def _entry(names: list[str], dest: str, action: str | None, nargs: Any, type_name: str | None,
           choices: Any) -> dict[str, Any]:
    if action in ZERO_ARITY_ACTIONS:
        arity: Any = 0
    else:
        arity = nargs if nargs in ("+", "*", "?") or isinstance(nargs, int) else 1
    if action == "BooleanOptionalAction":
        names = names + ["--no-" + n[2:] for n in names if n.startswith("--")]
    ok = isinstance(choices, (list, tuple)) and all(isinstance(c, (str, int, float)) for c in choices)
    return {"names": names, "dest": dest, "arity": arity, "action": action,
            "type": type_name if type_name in _SIMPLE_TYPES else None, "choices": list(choices) if ok else None}


def _from_call(call: ast.Call) -> dict[str, Any] | None:
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    names = [n for n in names if n.startswith("-")]
    if not names:
        return None
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    dest = _literal(kw.get("dest")) or names[0].lstrip("-").replace("-", "_")
    return _entry(names, dest, _name(kw.get("action")), _literal(kw.get("nargs")), _name(kw.get("type")),
                  _literal(kw.get("choices")))


def _calls_in(fn: ast.FunctionDef) -> list[dict[str, Any]]:
    out = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            entry = _from_call(node)
            if entry is not None:
                out.append(entry)
    return out


def _unwrap_optional(node: ast.AST) -> ast.AST:
    if isinstance(node, ast.Subscript) and _name(node.value) == "Optional":
        return node.slice
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # T | None
        return node.left if _literal(node.right) is None and isinstance(node.right, ast.Constant) else node
    return node


def _from_field(stmt: ast.AnnAssign) -> dict[str, Any] | None:
    ann = stmt.annotation
    if not (isinstance(ann, ast.Subscript) and _name(ann.value) in ("A", "Annotated")
            and isinstance(ann.slice, ast.Tuple) and isinstance(stmt.target, ast.Name)):
        return None
    inner, meta = _unwrap_optional(ann.slice.elts[0]), ann.slice.elts[1]
    field = stmt.target.id
    kw: dict[str, ast.AST] = {}
    if isinstance(meta, ast.Call) and _name(meta.func) == "Arg":
        kw = {k.arg: k.value for k in meta.keywords if k.arg}
    elif not (isinstance(meta, ast.Constant) and isinstance(meta.value, str)):
        return None
    if _literal(kw.get("no_cli")) is True:
        return None
    names = [_literal(kw.get("cli_name")) or "--" + field.replace("_", "-")] + list(_literal(kw.get("aliases")) or [])
    action, nargs, choices = _name(kw.get("action")), _literal(kw.get("nargs")), _literal(kw.get("choices"))
    type_name = _name(kw.get("type_parser"))
    origin = _name(inner.value) if isinstance(inner, ast.Subscript) else _name(inner)
    if action is None and origin == "Literal":
        choices = choices or _literal(inner.slice) if isinstance(inner, ast.Subscript) else choices
        choices = list(choices) if isinstance(choices, tuple) else ([choices] if isinstance(choices, str) else choices)
        type_name = type_name or "str"
    elif action is None and origin in ("List", "list") and type_name is None:
        nargs, type_name = nargs or "+", _name(_unwrap_optional(inner.slice))  # type: ignore[attr-defined]
    elif action is None and origin == "bool":
        action = "store_true"
    else:
        type_name = type_name or origin
    return _entry(names, field, action, nargs, type_name, choices)


def _namespace_imports(tree: ast.Module) -> dict[str, str]:
    """``{class name: module stem}`` of ``from sglang.srt.arg_groups.fields.X import (C, ...)``."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sglang.srt.arg_groups.fields."):
            for alias in node.names:
                out[alias.asname or alias.name] = node.module.rsplit(".", 1)[1]  # type: ignore[union-attr]
    return out


def _input_namespaces(tree: ast.Module) -> list[str]:
    """The class names of ``_INPUT_NAMESPACES = [Model, ..., Serving]`` (0.5.23), else ``[]``."""
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(_name(t) == "_INPUT_NAMESPACES" for t in node.targets)
                and isinstance(node.value, ast.List)):
            return [n for n in (_name(e) for e in node.value.elts) if n is not None]
    return []


def namespace_classes(server_args_py: Path) -> list[ast.ClassDef]:
    """0.5.23's namespace classes whose fields ``ServerArgs`` collects (``_INPUT_NAMESPACES``),
    read from ``arg_groups/fields/<module>.py`` beside ``server_args.py``; ``[]`` before 0.5.23."""
    tree = ast.parse(server_args_py.read_text())
    where = _namespace_imports(tree)
    out = []
    for name in _input_namespaces(tree):
        module = ast.parse((server_args_py.parent / "arg_groups" / "fields" / f"{where[name]}.py").read_text())
        out.append(next(n for n in module.body if isinstance(n, ast.ClassDef) and n.name == name))
    return out


def extract_flags(source: str, namespaces: list[ast.ClassDef] | None = None) -> list[dict[str, Any]]:
    """The flags of ``ServerArgs`` in one ``server_args.py`` (annotated fields, those of the
    ``namespaces`` classes it collects, then ``add_cli_args``' own calls), sorted by first name."""
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs")
    body = [s for c in [cls, *(namespaces or [])] for s in c.body]
    out = [e for s in body if isinstance(s, ast.AnnAssign) for e in [_from_field(s)] if e is not None]
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "add_cli_args")
    out += _calls_in(fn)
    return sorted(out, key=lambda e: e["names"][0])


def extract_flags_from(server_args_py: Path) -> list[dict[str, Any]]:
    """``extract_flags`` of a release's ``server_args.py`` file, its namespace classes included."""
    return extract_flags(server_args_py.read_text(), namespace_classes(server_args_py))


def main(argv: list[str]) -> int:
    src, release = Path(argv[0]), argv[1]
    flags = extract_flags_from(src)
    dest = Path(__file__).with_name(f"flags-{release}.json")
    head = json.dumps({"release": release, "source": "sglang/srt/server_args.py::ServerArgs.add_cli_args"})[:-1]
    rows = ",\n".join(json.dumps(f, sort_keys=True) for f in flags)  # one flag a line
    dest.write_text(f'{head}, "flags": [\n{rows}\n]}}\n')
    print(f"{dest}: {len(flags)} flags")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
