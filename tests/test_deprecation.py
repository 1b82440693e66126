"""Old import paths the docs name for users keep working: ``specstate.model.v2`` (now
``specstate.model.sglang_0_5_17``, docs/variants.md "Renamed names") and each of its modules import
as the very same module objects, with a ``SpecstateDeprecationWarning`` naming the replacement
(``specstate/_deprecation.py``); the shim names no release (the folder declares its old path,
``FORMERLY``). The internal module-path shims are gone (issue 38): ``specstate.model.worker`` /
``policies`` / ``known_bugs``, ``specstate.schema._recording17``.

Each check runs in a fresh interpreter, so the old path is imported for the first time there
(in this process a module is imported once, and warns once)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from specstate.errors import SpecstateDeprecationWarning

REPO = Path(__file__).resolve().parents[1]
NEW = "specstate.model.sglang_0_5_17"

#: the check run in the child: the statement, then what must hold (objects shared, warnings seen)
_CHILD = """
import warnings, sys
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    {statement}
from specstate.errors import SpecstateDeprecationWarning
import specstate.model.sglang_0_5_17.variants as new_variants, specstate.model.sglang_0_5_17.start as new_start
{checks}
ours = [w for w in caught if issubclass(w.category, SpecstateDeprecationWarning)]
for w in ours:
    print("WARN", w.filename.rsplit("/", 1)[-1], str(w.message))
"""


def _run(statement: str, checks: str) -> list[str]:
    code = _CHILD.format(statement=statement, checks=checks)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    return [line for line in out.stdout.splitlines() if line.startswith("WARN")]


def test_old_submodule_import_is_the_new_module_and_warns() -> None:
    warns = _run("import specstate.model.v2.variants as old_variants",
                 "assert old_variants is new_variants\n"
                 "assert sys.modules['specstate.model.v2.variants'] is new_variants\n"
                 "assert new_variants.__spec__.name == 'specstate.model.sglang_0_5_17.variants'\n"
                 "assert sys.modules['specstate.model.v2'].variants is new_variants\n")
    assert "WARN <string> specstate.model.v2 is deprecated: use specstate.model.sglang_0_5_17" in warns
    assert "WARN <string> specstate.model.v2.variants is deprecated: use specstate.model.sglang_0_5_17.variants" in warns


def test_from_old_package_import_names_and_modules() -> None:
    warns = _run("from specstate.model.v2 import start as old_start\n"
                 "    from specstate.model.v2.variants import H200_CONFIG, V2_OVERRIDES",
                 "assert old_start is new_start\n"
                 "assert H200_CONFIG is new_variants.H200_CONFIG and V2_OVERRIDES is new_variants.V2_OVERRIDES\n"
                 "from specstate.model.families import get_family, family_names\n"
                 "assert family_names().count('sglang-0.5.17') == 1\n")
    assert any("specstate.model.v2.start is deprecated: use specstate.model.sglang_0_5_17.start" in w for w in warns)
    assert any("specstate.model.v2.variants is deprecated" in w for w in warns)


def test_unknown_old_submodule_is_an_import_error() -> None:
    _run("import specstate.model.v2", "try:\n    import specstate.model.v2.no_such_module\n"
         "except ModuleNotFoundError:\n    pass\nelse:\n    raise AssertionError('imported')\n")


def test_the_suite_turns_our_deprecations_into_errors() -> None:
    """pyproject's filterwarnings: the suite itself never uses an old path unnoticed."""
    import warnings

    with pytest.raises(SpecstateDeprecationWarning):
        warnings.warn("x is deprecated: use y", SpecstateDeprecationWarning)


@pytest.mark.parametrize("module", ["specstate.model.worker", "specstate.model.policies", "specstate.model.known_bugs",
                                    "specstate.schema._recording17"])
def test_the_internal_module_path_shims_are_gone(module: str) -> None:
    """Only the paths documented for users keep a deprecation path (issue 38)."""
    import importlib.util

    assert importlib.util.find_spec(module) is None


def test_the_old_package_path_is_declared_by_its_release_folder() -> None:
    """``specstate/model/v2/`` asks the release folders which was once there; the shared shim names none."""
    from specstate.errors import InternalError
    from specstate.model.releases import formerly_at

    assert formerly_at("specstate.model.v2") == NEW
    with pytest.raises(InternalError, match="FORMERLY"):
        formerly_at("specstate.model.no_such_old_path")
    assert "0_5_17" not in (REPO / "specstate/model/v2/__init__.py").read_text()


@pytest.mark.parametrize(("old", "new"), [("specstate.commands.fuzz", "specstate.cli.fuzz"),
                                          ("specstate.commands.graph", "specstate.cli.graph"),
                                          ("specstate.commands.check", "specstate.cli.check"),
                                          ("specstate.fuzz.commands", "specstate._cli_support"),
                                          ("specstate.graph.figures", "specstate.cli.figures")])
def test_old_command_module_paths_are_the_cli_modules(old: str, new: str) -> None:
    """The command modules moved to ``specstate/cli/`` (docs/architecture.md): the paths the docs
    named still import, as the very same modules, with the warning naming the new one."""
    warns = _run(f"import {old}", f"import {new} as new\nassert sys.modules[{old!r}] is new\n")
    assert f"{old} is deprecated: use {new}" in " ".join(warns), warns

