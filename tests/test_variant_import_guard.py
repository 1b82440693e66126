"""One guard for importing the module of a variant a file names (issue 38): the command line's
``--allow-variant-import`` (``_cli_support.guard_variant_import``) and the Python API's
``allow_variant_import=True`` (``fuzz/trace.py::require_import_permission``) both ask
``model/variant_registry.py::require_variant_import``, so they agree case by case; only the hint
(how each interface gives permission) differs. No other module reads the permission."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from specstate import _cli_support
from specstate.errors import UsageError
from specstate.fuzz import trace as trace_module
from specstate.model import variant_registry
from specstate.model.variant_registry import ALLOW_IMPORT_ENV, require_variant_import, variant_import_allowed

ROOT = Path(__file__).resolve().parent.parent
NOT_IMPORTED = "tests.user_variants.never_imported_here:Patch"


def _cli(variant: str, allowed: bool) -> str | None:
    """The command line's answer: ``None`` (it may load) or the error's text."""
    try:
        _cli_support.guard_variant_import(SimpleNamespace(variant=variant), "t.json",
                                          argparse.Namespace(allow_variant_import=allowed))
    except UsageError as e:
        return str(e)
    return None


def _api(variant: str, allowed: bool) -> str | None:
    try:
        trace_module.require_import_permission(SimpleNamespace(variant=variant), "t.json", allowed)  # type: ignore[arg-type]
    except UsageError as e:
        return str(e)
    return None


CASES = [  # (variant, allowed, env permission, may load)
    ("fixed-threshold", False, False, True),  # a built-in name imports nothing
    (NOT_IMPORTED, False, False, False),
    (NOT_IMPORTED, True, False, True),
    (NOT_IMPORTED, False, True, True),
    ("specstate.model.variant_registry:Variant", False, False, True),  # already imported: no new code runs
]


@pytest.mark.parametrize("variant,allowed,env,may", CASES)
def test_the_command_line_and_the_api_agree(variant: str, allowed: bool, env: bool, may: bool,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALLOW_IMPORT_ENV, raising=False)
    if env:
        monkeypatch.setenv(ALLOW_IMPORT_ENV, "1")
    assert NOT_IMPORTED.partition(":")[0] not in sys.modules
    assert variant_import_allowed(variant, allowed) is may
    cli, api = _cli(variant, allowed), _api(variant, allowed)
    assert (cli is None, api is None) == (may, may)
    if not may:
        assert cli is not None and api is not None
        assert cli.endswith("If you trust this trace, add --allow-variant-import")
        assert api.endswith("If you trust this trace, pass allow_variant_import=True (on the command line: "
                            "--allow-variant-import)")
        same = "t.json names the variant 'tests.user_variants.never_imported_here:Patch': replaying it imports " \
               "module 'tests.user_variants.never_imported_here' and runs its code."
        assert cli.startswith(same) and api.startswith(same)


def test_both_callers_ask_the_one_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, object, bool]] = []

    def guard(variant: str, source: object, allowed: bool = False, *, hint: str = "") -> None:
        asked.append((variant, source, allowed))
        raise UsageError("refused by the one guard")

    monkeypatch.setattr(variant_registry, "require_variant_import", guard)
    assert _cli("a.b:C", True) == "refused by the one guard"
    assert _api("a.b:C", False) == "refused by the one guard"
    assert asked == [("a.b:C", "t.json", True), ("a.b:C", "t.json", False)]


def test_the_cli_guard_skips_a_trace_whose_variant_is_not_loaded() -> None:
    _cli_support.guard_variant_import(SimpleNamespace(variant=NOT_IMPORTED), "t.json",
                                      argparse.Namespace(allow_variant_import=False), used=False)
    with pytest.raises(UsageError, match="add --allow-variant-import"):
        require_variant_import(NOT_IMPORTED, "t.json", hint="add --allow-variant-import")


#: code that reads the permission itself (a docstring naming the variable is fine)
READS = re.compile(r"environ\b[^\n]*(ALLOW_IMPORT_ENV|[\"']" + ALLOW_IMPORT_ENV + ")")


def test_no_other_module_reads_the_permission() -> None:
    assert READS.search('allowed = os.environ.get("SPECSTATE_ALLOW_VARIANT_IMPORT") == "1"')  # the old second guard
    readers = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "specstate").rglob("*.py")
                     if READS.search(p.read_text(encoding="utf-8")))
    assert readers == ["specstate/model/variant_registry.py"], f"a second guard reads {ALLOW_IMPORT_ENV}: {readers}"
