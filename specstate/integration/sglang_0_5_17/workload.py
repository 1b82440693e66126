"""A 0.5.17 recording as the workload the model replays: the adapter's ``workload`` part
(``integration/adapter.py``), read by ``graph --from-recording``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specstate.model import Action, SpecConfig

__all__ = ["recorded_actions"]


def recorded_actions(path: Path | str, threshold: int | None, records: Any) -> tuple[SpecConfig, list[Action], str]:
    """The config of the header (the recording carries its adaptive config: ``threshold`` is not
    used), the actions its loops replay as (``conformance.recorded_workload``) and what they were
    read from; a header the model cannot run is a ``RecordingFormatError``."""
    from specstate.errors import InvalidConfig, RecordingFormatError
    from specstate.integration.sglang_0_5_17.conformance import config_from_header, recorded_workload

    rec = recorded_workload(records)
    try:
        config = config_from_header(rec.header)
    except (InvalidConfig, ValueError) as e:
        raise RecordingFormatError(f"{path}: the header's configuration is not one the model runs: {e}") from None
    return config, list(rec.actions), f"{len(rec.loops)} recorded loops, {len(rec.rid_index)} requests"
