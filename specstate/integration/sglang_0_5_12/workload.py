"""A 0.5.12 recording as the workload the model replays: the adapter's ``workload`` part
(``integration/adapter.py``), read by ``graph --from-recording``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specstate.model import Action, SpecConfig

__all__ = ["recorded_actions"]


def recorded_actions(path: Path | str, threshold: int | None, records: Any) -> tuple[SpecConfig, list[Action], str]:
    """The config of the header (with the switch ``threshold``), the actions the records replay as,
    and what they were read from (``conformance.read_recording``: records that do not fit together
    are a ``RecordingFormatError``)."""
    from specstate.integration.sglang_0_5_12.conformance import read_recording

    _, config, wl = read_recording(path, threshold, records=records)
    return config, list(wl.actions), f"{len(wl.iterations)} recorded iterations, {len(wl.rid_index)} requests"
