"""The one way of a recording through conformance, for every release:

    load and validate once (``load``: ``specstate.schema.load_recording``; its schema names the
    family) -> the release's adapter (``catalog.adapter_of``) -> the variant it is paired with
    (``check_pairing``) -> the adapter's conformance (the model replays the recorded actions;
    ``compare.compare``) -> one report (``check_recording``).

The driver's summary (``summary``) and ``graph --from-recording`` (``graph/sources.py``) start from
the same ``load``. Nothing here names a release: what differs between releases is the adapter's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specstate.integration.catalog import adapter_of, adapter_of_schema, default_variants
from specstate.integration.compare import load_records

__all__ = ["load", "check_pairing", "check_recording", "summary", "summary_of_file", "read_lines_leniently",
           "default_variant_of", "DEFAULT_VARIANTS"]

#: the variant a recording is compared with when none is named, by the family its schema names
DEFAULT_VARIANTS = default_variants()

#: the loader (``compare.load_records``): the records validated once, ``.header`` and ``.family`` set
load = load_records


def _models_release(theirs: str, recorded: str) -> bool:
    """A variant's family models a recording of family ``recorded``: it is that family, or one
    derived from it (``Family.base``) that stands for the recorded release too (``releases``),
    as a patch family over 0.5.17 does; 0.5.23 (base 0.5.17, releases 0.5.23 only) does not."""
    from specstate.model.families import get_family

    if theirs == recorded:
        return True
    family = get_family(theirs)
    return family.base == recorded and get_family(recorded).source_release in family.releases


def check_pairing(path: Path | str, records: Any, variant: str | None) -> str:
    """The variant to compare ``records`` with: ``variant`` if it models the recording's family
    (``Recording.family``, from its schema; ``_models_release``), the family's default if ``None``;
    a variant of another family is a ``UsageError`` (its mismatches would say nothing)."""
    from specstate.errors import UsageError
    from specstate.model import as_variant

    adapter = adapter_of(records)
    if variant is None:  # a release may read it from the header (0.5.17: a static launch, the switch patch)
        return adapter.part("header_variant")(records.header) if "header_variant" in adapter.parts else adapter.default_variant
    theirs = as_variant(variant).family_name
    if not _models_release(theirs, adapter.family):
        raise UsageError(f"Expected a variant of {adapter.family} for {path} (its schema {records.header.get('schema')} "
                         f"is the {adapter.family} recorder's) but got --variant {variant} (family {theirs}); its "
                         f"family's default is --variant {adapter.default_variant}")
    return variant


def default_variant_of(report: dict[str, Any]) -> str:
    """The variant a report of ``check_recording`` was made with."""
    return str(report["variant"])


def check_recording(path: Path | str, variant: str | None, threshold: int | None, *,
                    threshold_given: bool = False) -> dict[str, Any]:
    """Everything for one recorded file: invariants on recorded states and conformance with the
    variant its family pairs it with (``check_pairing``); ``threshold``: the switching threshold
    of a release whose recordings do not carry it (0.5.12's; 0.5.17's is the recording's own:
    ``threshold_given``, the user's ``--threshold``, is refused for it, as it would do nothing)."""
    from specstate.errors import UsageError

    records = load(path)
    variant = check_pairing(path, records, variant)
    adapter = adapter_of(records)
    if threshold_given and not adapter.takes_threshold:
        raise UsageError(f"--threshold: {path} is a recording of {adapter.family}, which carries its own adaptive "
                         f"config (no switching threshold); drop it")
    report = adapter.check(path, records, variant, threshold)
    return {**report, "family": adapter.family, "variant": variant}


def summary(records: Any) -> dict[str, Any]:
    """What a loaded recording shows at a glance (the driver's summary): its adapter's counts."""
    return adapter_of(records).counts(records)


def summary_of_file(path: Path | str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The records of a recording the driver just wrote and their ``summary``. A file the loader
    refuses (an engine that died mid-line, a recorder error) is still counted, from its lines
    as written (``read_lines_leniently``) by the adapter its header's schema names; the counts
    then carry the loader's verdict (``recording_error``)."""
    from specstate.errors import RecordingFormatError

    try:
        records = load(path)
    except RecordingFormatError as e:
        raw = read_lines_leniently(path)
        header = next((r for r in raw if r.get("ev") == "header"), {})
        counts = adapter_of_schema(header.get("schema")).counts(raw)
        counts["recording_error"] = str(e)[:300]
        return raw, counts
    return records, summary(records)


def read_lines_leniently(path: Path | str) -> list[dict[str, Any]]:
    """Every JSON line of ``path`` as written; a line that does not parse is ``{"ev": "unparsable"}``."""
    import json

    out: list[dict[str, Any]] = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                data = {"ev": "unparsable", "line": line[:200]}
            out.append(data if isinstance(data, dict) else {"ev": "unparsable", "line": line[:200]})
    return out
