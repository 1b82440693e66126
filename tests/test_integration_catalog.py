"""The integration's release catalog (``integration/catalog.py``) and the one way of a recording
(``integration/conform.py``): every adapter's parts import, a recording finds its adapter by its
schema, the driver's summary reads a broken file too, each release's record models are its folder's, and
the old paths are deprecation shims."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from specstate.errors import SpecstateDeprecationWarning, UsageError
from specstate.integration import catalog, conform

DATA = Path(__file__).parent / "data" / "gpu"
V1 = DATA / "none" / "random-0-1.jsonl.gz"
V17 = DATA / "v17" / "g002.jsonl.gz"


@pytest.mark.parametrize("adapter", catalog.ADAPTERS, ids=lambda a: a.family)
def test_every_part_of_every_adapter_imports(adapter: catalog.ReleaseAdapter) -> None:
    for part in ("counts", "engine_kwargs", "engine_env", "register", "record_models"):
        assert callable(adapter.part(part)), part
    from specstate.integration.walk import Conformance

    assert isinstance(adapter.conformance(), Conformance)  # check, observe and workload walk it


def test_a_recording_finds_its_adapter_by_its_schema() -> None:
    assert catalog.adapter_of(conform.load(V1)).family == "sglang-0.5.12"
    assert catalog.adapter_of(conform.load(V17)).family == "sglang-0.5.17"
    assert catalog.adapter_modelling("upstream-v23").family == "sglang-0.5.17"  # 0.5.23 derives from 0.5.17
    with pytest.raises(UsageError, match="Expected an engine from"):
        catalog.adapter_for("sglang-9.9")


def test_the_summary_of_a_cut_short_recording_still_counts(tmp_path: Path) -> None:
    whole = tmp_path / "whole.jsonl"
    with gzip.open(V17, "rt") as f:
        whole.write_text(f.read())
    cut = tmp_path / "cut.jsonl"
    shutil.copy(whole, cut)
    with open(cut, "a") as f:
        f.write('{"ev": "loop", "lo')  # the engine died mid-line
    _, good = conform.summary_of_file(whole)
    _, bad = conform.summary_of_file(cut)
    assert "recording_error" not in good and "line" in bad.pop("recording_error")
    assert bad == good and "switch_down" in good  # the 0.5.17 adapter's counts, both times


def test_the_oracle_catalog_s_releases_are_its_modules_own_and_the_old_table_warns():
    import sys

    from specstate.oracle import catalog

    assert catalog.RELEASES == tuple(m.ORACLE.release for m in catalog.MODULES)
    assert set(catalog.VARIANTS) == set(catalog.RELEASES)
    assert [r for r in catalog.RELEASES if catalog.is_overlap(r)] == ["0.5.17", "0.5.23"]
    with pytest.warns(SpecstateDeprecationWarning, match="oracle.catalog.VARIANTS"):
        from specstate.oracle import FAMILY
    assert FAMILY == catalog.VARIANTS
    assert "specstate.integration.sglang_0_5_12.oracle" in sys.modules  # MODULES imported them; RELEASES alone does not:
    assert [m.__name__ for m in catalog.MODULES] == [catalog.module_of(r) for r in catalog.RELEASES]
    assert all(m.__name__.endswith(f".sglang_{m.ORACLE.release.replace('.', '_')}.oracle") for m in catalog.MODULES)
    import subprocess

    probe = ("import sys; from specstate.oracle.catalog import RELEASES; "
             "print(RELEASES, any(m.endswith('.oracle') and '.sglang_' in m for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "('0.5.9', '0.5.12', '0.5.17', '0.5.23') False"


def test_each_release_s_record_models_are_its_own_folder_s() -> None:
    """The loader's table is the catalog's: every schema id names an adapter whose ``recording.py``
    (beside its recorder) checks the header, and the schema package names no release."""
    import specstate.schema._recording as loader

    for schema, adapter in catalog.RECORDING_SCHEMAS.items():
        models_for = adapter.record_models()
        assert models_for.__module__ == f"{adapter.package}.recording"
        assert "header" in models_for({"ev": "header", "schema": schema})
        assert catalog.SCHEMAS[schema] == adapter.family
    assert "sglang-0.5" not in Path(loader.__file__).read_text()


def test_the_old_recording_schema_paths_warn_and_give_the_new_objects(tmp_path: Path) -> None:
    from specstate.schema import _recording, _recording_checks

    with pytest.warns(SpecstateDeprecationWarning, match="integration.catalog.SCHEMAS"):
        assert _recording_checks.SCHEMAS is catalog.SCHEMAS
    with pytest.raises(AttributeError):  # the internal renamed name is gone (issue 38): the recorder's module has it
        _recording.RECORD_MODELS  # noqa: B018
    for whole in (V1, V17):
        with pytest.warns(SpecstateDeprecationWarning, match="integration.compare.load_records"):
            assert _recording.load_recording(whole) == conform.load(whole)


def test_the_driver_asks_an_adapter_for_its_fuzz_workloads() -> None:
    """``--fuzz-v2``'s workloads come from the adapter whose parts name ``fuzz_workloads`` (0.5.17's
    generator), whichever engine the driver runs; the driver imports no release folder for them."""
    from specstate.integration import sglang_driver
    from specstate.integration.sglang_0_5_17.engine import fuzz_v2_workloads

    for engine in catalog.ENGINES:
        provider = sglang_driver._fuzz_workloads_provider(engine)
        assert provider.part(sglang_driver.FUZZ_WORKLOADS) is fuzz_v2_workloads
    assert "from specstate.integration.sglang_0_5" not in Path(sglang_driver.__file__).read_text()
