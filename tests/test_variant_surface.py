"""The public surface for variant authors (``specstate.variant``, docs/variants.md): every name
of ``__all__`` resolves, the documented table is exactly ``__all__``, the documented operations
are exactly ``OP_NAMES``, and the deprecation helpers keep an old name working with a warning
that names the replacement (not a bare ``TypeError`` / ``AttributeError``)."""

from __future__ import annotations

import re
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
