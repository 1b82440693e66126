"""What makes a recording judgeable, beyond each record's own shape (``_recording.py``).

A recording is compared with the model only if the comparison can mean something:

- its header is the first record and the only one, and names a schema this specstate reads
  (the table the loader is given: the integration catalog's ``RECORDING_SCHEMAS``; the schema
  decides the family, sglang 0.5.12's v1 worker or 0.5.17's v2); an
  unknown version is refused saying whether it is older or newer than the ones known;
- the header agrees with itself: the ``sglang`` version it names is its schema's, the
  speculative sizes it lists (``topk``, ``speculative_num_steps``,
  ``speculative_num_draft_tokens``) are its own server arguments', a capture list is not
  empty, an embedded adaptive config (``adaptive_config_text``) is a JSON object of the shape
  sglang reads;
- records come in the order the recorder writes them: 0.5.12's iteration counter (``iter``)
  never goes back and a ``post`` follows its own forward (``fbg``); 0.5.17's loop counter
  (``loop``) never goes back and a loop's ``fbg`` / ``post`` / ``end`` follow its ``loop`` line.

What differs between releases is the release's to say, not this module's: the release a schema
names (``RecordingSchema``: the integration's ``ReleaseAdapter``) declares the header fields that
must equal their server arguments (``header_agrees``), whether its header embeds an adaptive
config (``adaptive_header``) and its recorder's counter (``record_counter``: ``iter`` or ``loop``,
the two orders above); nothing here names a release.

Each problem is one ``RecordingFormatError`` naming the file, the line and what was expected.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

from specstate.errors import InternalError, RecordingFormatError
from specstate.schema._messages import printable

from specstate._deprecation import renamed_names

__all__ = ["family_of_schema", "check_header", "RecordOrder"]

#: the schema-id table is the integration catalog's now (each release adapter names its schemas)
__getattr__ = renamed_names(__name__, {"SCHEMAS": "specstate.integration.catalog:SCHEMAS"})


def _version(schema: str) -> tuple[str, int] | None:
    stem, _, n = schema.rpartition("/")
    return (stem, int(n)) if n.isdigit() and stem else None


def family_of_schema(path: Path, schema: Any, schemas: Mapping[str, Any]) -> str:
    """The family of a ``schema`` known to ``schemas`` (id -> its release, with a ``family``);
    else one line saying what is known and what to do."""
    if isinstance(schema, str) and schema in schemas:
        return schemas[schema].family
    known = ", ".join(schemas)
    if not isinstance(schema, str):
        raise RecordingFormatError(f"{path}: line 1 (header): expected a schema from {known} but the header has "
                                   f"{'none' if schema is None else printable(repr(schema))}")
    parsed = _version(schema)
    same = [_version(s)[1] for s in schemas if parsed and _version(s)[0] == parsed[0]]  # type: ignore[index]
    if parsed and same and parsed[1] < min(same):
        raise RecordingFormatError(f"{path}: line 1 (header): schema {printable(schema)!r} is an older recorder's; "
                                   f"this specstate reads {', '.join(s for s in schemas if s.startswith(parsed[0]))}: "
                                   f"record it again with this specstate's recorder (docs/gpu.md)")
    if parsed and same:
        raise RecordingFormatError(f"{path}: line 1 (header): schema {printable(schema)!r} is newer than this specstate "
                                   f"reads ({known}): upgrade specstate to judge it")
    raise RecordingFormatError(f"{path}: line 1 (header): expected a schema from {known} but got "
                               f"{printable(schema[:80])!r}")


def _agree(path: Path, header: dict[str, Any], pairs: tuple[tuple[str, str], ...]) -> None:
    sa = header.get("server_args") or {}
    for mine, theirs in pairs:
        a, b = header.get(mine), sa.get(theirs)
        if a is not None and b is not None and a != b:
            raise RecordingFormatError(f"{path}: line 1 (header): {mine} is {a} but its server_args.{theirs} is {b}: "
                                       f"the header contradicts itself")


def _adaptive_text(path: Path, text: Any) -> None:
    """An embedded adaptive config: a JSON object of ``{batch size: {"candidate_steps": [n, ...]}}``;
    any other top-level key is accepted, as sglang's ``_load_adaptive_config`` skips it as a slot
    (the model's ``adaptive.ignored_keys`` lists the ones nothing reads; ``conform`` reports them)."""
    if text is None:
        return
    where = f"{path}: line 1 (header): adaptive_config_text"
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise RecordingFormatError(f"{where}: expected a JSON object but it does not parse: {printable(str(e))[:120]}") from None
    if not isinstance(data, dict):
        raise RecordingFormatError(f"{where}: expected a JSON object but got {type(data).__name__}")
    slots = {k: v for k, v in data.items() if k.isdigit()}  # sglang skips any other key as a slot
    if not slots:
        raise RecordingFormatError(f"{where}: expected at least one batch-size key (sglang's _load_adaptive_config "
                                   f"refuses the config) but got keys {printable(repr(list(data)[:8]))[:120]}")
    for key, slot in slots.items():
        steps = slot.get("candidate_steps") if isinstance(slot, dict) else None
        if not isinstance(steps, list) or not steps or not all(type(s) is int and 0 <= s <= 64 for s in steps):
            raise RecordingFormatError(f"{where}: expected {{batch size: {{\"candidate_steps\": [ints in [0, 64]]}}}} but "
                                       f"entry {printable(key[:40])!r} is {printable(repr(slot))[:80]}")


def check_header(path: Path, header: dict[str, Any], release: Any) -> str:
    """The family of ``release`` (its schema's ``RecordingSchema``) if the header agrees with
    itself as the release declares (module doc); else one error."""
    family: str = release.family
    version = family.removeprefix("sglang-")
    named = header.get("sglang")
    if named is not None and not re.match(re.escape(version) + r"(?![0-9])", str(named)):  # 0.5.17.post1 is 0.5.17
        raise RecordingFormatError(f"{path}: line 1 (header): it names sglang {printable(str(named))[:40]} but schema "
                                   f"{header['schema']} is the sglang {version} recorder's")
    _agree(path, header, tuple(release.header_agrees))
    if release.adaptive_header:
        _adaptive_text(path, header.get("adaptive_config_text"))
    return family


class RecordOrder:
    """Records in the order the recorder writes them (module doc): ``see`` each in turn."""

    def __init__(self, path: Path, release: Any) -> None:
        self.path, self.key = path, release.record_counter
        if self.key not in ("iter", "loop"):
            raise InternalError(f"Expected a record counter from iter, loop but the release of {release.family} "
                                f"declares {self.key!r}")
        self.loops = self.key == "loop"  #: the overlap loop's order (0.5.17), else the forwards' (0.5.12)
        self.counter: int | None = None  #: the last ``iter`` (0.5.12) or ``loop`` (0.5.17) seen
        self.open_forward = False  #: ``iter``: an ``fbg`` without its ``post`` yet
        self.loop_line: int | None = None  #: ``loop``: the ``loop`` of the last loop line

    def _fail(self, n: int, ev: Any, what: str) -> None:
        raise RecordingFormatError(f"{self.path}: line {n} ({printable(str(ev))[:20]}): {what}: the records are not in "
                                   f"the order the recorder writes them")

    def see(self, n: int, r: dict[str, Any]) -> None:
        ev, key = r.get("ev"), self.key
        value = r.get(key)
        if type(value) is int and self.loops and ev == "retract":
            # written inside get_next_batch_to_run, before its iteration's loop line, with that
            # iteration's number (the 0.5.17 recorder's around_retract_decode): one ahead
            if self.counter is not None and not self.counter <= value <= self.counter + 1:
                self._fail(n, ev, f"a retract of loop {value} after loop {self.counter}")
        elif type(value) is int:
            if self.counter is not None and value < self.counter:
                self._fail(n, ev, f"{key} {value} comes after {key} {self.counter}")
            self.counter = value
        if self.loops:
            self._see_loop(n, ev, value)
        else:
            self._see_forward(n, ev, r)

    def _see_forward(self, n: int, ev: Any, r: dict[str, Any]) -> None:
        if ev in ("fbg", "fbg_error"):
            self.open_forward = True
        elif ev == "post":
            if not self.open_forward:
                self._fail(n, ev, "a post with no forward (fbg) before it")
            self.open_forward = False

    def _see_loop(self, n: int, ev: Any, loop: Any) -> None:
        if ev == "loop":
            self.loop_line = loop
        elif ev in ("fbg", "fbg_error", "post", "end") and type(loop) is int and loop != self.loop_line:
            self._fail(n, ev, f"{ev} of loop {loop} before that loop's loop line")
