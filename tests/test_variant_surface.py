"""The public surface for variant authors (``specstate.variant``, docs/variants.md): every name
of ``__all__`` resolves, the documented table is exactly ``__all__``, the documented operations
are exactly ``OP_NAMES``, and the deprecation helpers keep an old name working with a warning
that names the replacement (not a bare ``TypeError`` / ``AttributeError``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

import specstate.variant as surface
from specstate.errors import SpecstateDeprecationWarning

DOC = (Path(__file__).resolve().parents[1] / "docs" / "variants.md").read_text()


def _section(title: str) -> str:
    return DOC.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_every_exported_name_resolves() -> None:
    missing = [n for n in surface.__all__ if not hasattr(surface, n)]
    assert missing == []
    assert len(set(surface.__all__)) == len(surface.__all__)


def test_documented_names_are_all() -> None:
    documented = re.findall(r"^\| `(\w+)` \|", _section("Names"), flags=re.M)
    assert documented == list(surface.__all__)


def test_documented_operations_are_op_names() -> None:
    documented = re.findall(r"`(\w+)`", _section("Operations").split(":", 1)[1])
    assert sorted(set(documented) - {"ops_table"}) == sorted(surface.OP_NAMES)


def test_surface_objects_are_the_models_own() -> None:
    from specstate.model.families import get_family
    from specstate.model.variants import get_variant

    assert surface.FAMILY_0_5_17 is get_family("sglang-0.5.17") and surface.FAMILY_0_5_23.base == "sglang-0.5.17"
    assert surface.get_variant is get_variant
    assert surface.default_ops() is surface.DEFAULT_OPS
    assert surface.Ops.__module__ == "specstate.model.ops_table"


def test_the_documented_example_runs() -> None:
    example = DOC.split("```python\n", 1)[1].split("```", 1)[0].replace('"never"', '"surface-example-never"')
    from specstate.model.variant_registry import _REGISTRY

    try:
        exec(compile(example, "docs/variants.md", "exec"), {})
        v = surface.get_variant("surface-example-never")
        assert v.family_name == "sglang-0.5.12" and v.ops().decide_speculation(None, None, None) is False
    finally:
        _REGISTRY.pop("surface-example-never", None)  # the registry is the process's: leave it as found


@surface.renamed_fields({"accept_len": "accept_length", "legacy": None})
@dataclass(frozen=True)
class _Record:
    accept_length: int = 0


def test_renamed_field_keyword_and_attribute_warn_with_the_replacement() -> None:
    with pytest.warns(SpecstateDeprecationWarning, match=r"_Record\(accept_len=\.\.\.\) is deprecated: use "
                                                         r"_Record\(accept_length=\.\.\.\)"):
        r = _Record(accept_len=3)
    assert r == _Record(accept_length=3)
    with pytest.warns(SpecstateDeprecationWarning, match=r"_Record\.accept_len is deprecated: use _Record\.accept_length"):
        assert r.accept_len == 3
    with pytest.warns(SpecstateDeprecationWarning, match="the field was removed"):
        assert _Record(legacy=1) == _Record()
    with pytest.raises(TypeError):
        _Record(never_a_field=1)
    with pytest.raises(AttributeError):
        r.never_a_field  # noqa: B018


def test_renamed_names_serve_the_new_object() -> None:
    module = types.ModuleType("_surface_old_names")
    module.__getattr__ = surface.renamed_names("_surface_old_names", {"OldVariant": "specstate.variant:Variant"})
    sys.modules["_surface_old_names"] = module
    try:
        with pytest.warns(SpecstateDeprecationWarning, match=r"_surface_old_names\.OldVariant is deprecated: use "
                                                             r"specstate\.variant\.Variant"):
            from _surface_old_names import OldVariant  # type: ignore[import-not-found]
        assert OldVariant is surface.Variant
        with pytest.raises(ImportError):
            from _surface_old_names import Nothing  # type: ignore[import-not-found]  # noqa: F401
    finally:
        del sys.modules["_surface_old_names"]


# -- importable first (issue 38): a fresh interpreter whose first specstate import is the surface --

ROOT = Path(__file__).resolve().parents[1]

#: a release folder written against ``specstate.variant`` alone (as docs/architecture.md, "Adding a
#: release", says), over the newest built-in one; the catalogs import it as they import every release
NEW_RELEASE = '''
from dataclasses import replace

from specstate.variant import FAMILY_0_5_23, OVERRIDES_0_5_23, Variant, register, register_family

FAMILY = register_family(replace(
    FAMILY_0_5_23, name="sglang-9.9.9", summary="a release written against specstate.variant (test only)",
    default_variant="upstream-v999", base=FAMILY_0_5_23.name, release_range=(), changes=(),
    overridden_citations=(), unreviewed_citations=()))
UPSTREAM = register(Variant("upstream-v999", "sglang 9.9.9 as shipped (test only)",
                            overrides={**OVERRIDES_0_5_23}, correct=True, family="sglang-9.9.9"))
'''

#: a user's variant module that imports the surface before anything else of specstate
USER_VARIANT = '''
from specstate.variant import OVERRIDES_0_5_17, Variant, register, threshold_decision

MINE = register(Variant("mine-first", "a user's variant importing specstate.variant first",
                        overrides={**OVERRIDES_0_5_17}, family="sglang-0.5.17"))
'''


def _python(code: str, cwd: Path, path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env={**env, "PYTHONPATH": str(path)},
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def tree_with_a_new_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package with one more release folder (``sglang_9_9_9``, written against
    ``specstate.variant``) and its line in each catalog."""
    root = tmp_path_factory.mktemp("tree")
    shutil.copytree(ROOT / "specstate", root / "specstate", ignore=shutil.ignore_patterns("__pycache__"))
    folder = root / "specstate/model/sglang_9_9_9"
    folder.mkdir()
    (folder / "__init__.py").write_text(NEW_RELEASE)
    for catalog in ("families.py", "variants.py"):
        with open(root / "specstate/model" / catalog, "a") as f:
            f.write("\nfrom specstate.model import sglang_9_9_9  # noqa: F401,E402\n")
    (root / "mine_first.py").write_text(USER_VARIANT)
    return root


@pytest.mark.parametrize("first", [
    "import specstate.variant",
    "from specstate.variant import Variant",
    "from specstate.variant import *",
    "import specstate.model.families",  # the commands' order: the catalog first, the surface from the release
])
def test_a_release_written_against_the_surface_imports_in_any_order(tree_with_a_new_release: Path, first: str) -> None:
    root = tree_with_a_new_release
    code = (f"{first}\nimport specstate, specstate.variant as v\n"
            f"assert specstate.__file__.startswith({str(root)!r}), specstate.__file__\n"
            "fam = v.get_family('sglang-9.9.9')\n"
            "print(fam.base, v.get_variant(fam.default_variant).family_name, v.FAMILY_0_5_23.name)")
    proc = _python(code, root, root)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["sglang-0.5.23", "sglang-9.9.9", "sglang-0.5.23"]


def test_a_user_variant_importing_the_surface_first_loads(tree_with_a_new_release: Path) -> None:
    root = tree_with_a_new_release
    code = ("import mine_first\n"
            "from specstate.variant import load_variant, get_variant\n"
            "v = load_variant('mine_first:MINE')\n"
            "print(v.name, v.family_name, get_variant('mine-first') is v, v.ops().overridden().keys() >= "
            "{'iteration'})")
    proc = _python(code, root, root)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["mine-first", "sglang-0.5.17", "True", "True"]


def test_importing_the_surface_imports_no_release() -> None:
    """``import specstate.variant`` alone imports none of the model (the names come at first use) but
    the release folders' scan (``model/releases.py``: the ``FAMILY_X_Y_Z`` names, read from the folders)."""
    code = ("import sys, specstate.variant as v\n"
            "print(sorted(m for m in sys.modules if m.startswith('specstate.model')), 'torch' in sys.modules)\n"
            "assert set(v.__all__) <= set(dir(v))")
    proc = _python(code, ROOT, ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["['specstate.model',", "'specstate.model.releases']", "False"]
