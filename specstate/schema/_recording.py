"""A recording: the JSON lines a release's recorder writes on a GPU host, read by ``specstate
conform``, ``graph --from-recording`` and ``replay --engine sglang``; the engine-neutral loader.

One object per line, each with ``ev``; the header (``ev: header``) names its schema, and the
schema names the release whose record models check every line: ``read_recording`` is given the
table of schemas (``RecordingSchema``: the integration's catalog,
``specstate.integration.catalog.RECORDING_SCHEMAS``, each release's models in its integration
folder, ``integration/sglang_X_Y_Z/recording.py``, over the shared ``_record_types.py``); the
integration's ``load_records`` (``integration/compare.py``) is the loader with that table. A
line that is not JSON, a record of the wrong shape, a file with no header, a truncated or
corrupt ``.gz``: each is one ``RecordingFormatError`` naming the file, the line and the
record's JSON path. What makes the records judgeable together (the header first and only,
a known schema, a header that agrees with itself, records in the recorder's order) is
``_recording_checks.py``; ``Recording.family`` is the family the schema names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

from pydantic import BaseModel, ValidationError

from specstate._deprecation import moved_function
from specstate.errors import RecordingFormatError
from specstate.schema._files import MAX_NESTING, nesting_depth, read_lines
from specstate.schema._messages import describe_error, printable, shorten
from specstate.schema._record_types import _Open

__all__ = ["Recording", "RecordingSchema", "read_recording", "load_recording", "typed_records", "as_given"]

#: the models of one record, by its ``ev`` (a release's ``model_for``)
ModelsFor = Callable[[dict[str, Any]], Mapping[str, type[BaseModel]]]


class RecordingSchema(Protocol):
    """What the loader needs of the release a schema id names (a ``ReleaseAdapter`` is one)."""

    family: str
    #: header fields that must equal their ``server_args`` namesakes: ``(header field, server_args field)``
    header_agrees: tuple[tuple[str, str], ...]
    adaptive_header: bool  #: its header may embed an adaptive config (``adaptive_config_text``)
    record_counter: str  #: its recorder's counter: ``iter`` (each forward) or ``loop`` (the overlap loop)

    def record_models(self) -> ModelsFor:
        """The release's models for one record (the ``model_for`` function of each release's ``recording.py`` in ``integration/``)."""
        ...


class _Other(_Open):
    ev: str


class Recording(list):
    """The validated records (plain dicts, as written) of one file; ``header`` is its first
    record, ``family`` the engine family its schema names, ``typed`` the same records as the
    release's models validated them (one per line, in order: what conformance reads). ``typed``
    is the file as loaded: records a caller changed are validated again (``typed_records``) where
    they come without it: a copy (``copy.deepcopy``, ``Recording(recording)``) has none, and the
    releases' ``check_recording(records=...)`` drop it."""

    header: dict[str, Any]
    family: str
    typed: list[BaseModel]

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.typed = []

    def __deepcopy__(self, memo: dict[int, Any]) -> "Recording":
        """A copy to be changed, without the typed view (it would go stale)."""
        import copy

        return as_given(Recording(copy.deepcopy(r, memo) for r in self), like=self, memo=memo)


#: the deepest nesting a record line may have (the recorder writes 4 at most): the one reader's
#: bound (``_files.MAX_NESTING``), checked before ``json.loads``, whose recursion would otherwise
#: depend on the caller's stack


def _parse(path: Path, n: int, line: str) -> dict[str, Any]:
    try:
        if line.count("[") + line.count("{") > MAX_NESTING and nesting_depth(line) > MAX_NESTING:
            raise RecursionError
        data = json.loads(line)
    except RecursionError:
        raise RecordingFormatError(f"{path}: line {n}: expected a record but it nests too deeply") from None
    except ValueError as e:
        raise RecordingFormatError(f"{path}: line {n}: expected a JSON record but it does not parse: {e}") from None
    if not isinstance(data, dict):
        raise RecordingFormatError(f"{path}: line {n}: expected a JSON object but got {shorten(data)}")
    return data


def _record(path: Path, n: int, data: dict[str, Any], models: Mapping[str, type[BaseModel]]) -> BaseModel:
    """``data`` as the model its ``ev`` names (``_Other``: a record no model describes)."""
    ev = data.get("ev")
    model = models.get(ev, _Other) if isinstance(ev, str) else _Other
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise RecordingFormatError(describe_error(e, f"{path}", prefix=f"line {n} ({printable(ev)[:40]}): ")) from None


def as_given(records: Any, *, like: Any = None, memo: dict[int, Any] | None = None) -> Any:
    """Records a caller hands in (``check_recording(records=...)``), without their typed view:
    it is the records as loaded, and the caller may have changed the dicts since (``typed_records``
    then validates them again); a ``Recording`` keeps its ``header`` and ``family``."""
    import copy

    src = records if like is None else like
    if not isinstance(src, Recording):
        return records
    out = Recording(records)
    for name in ("header", "family"):
        if hasattr(src, name):
            value = getattr(src, name)
            setattr(out, name, value if memo is None else copy.deepcopy(value, memo))
    return out


def typed_records(records: Any, models: ModelsFor) -> list[BaseModel]:
    """The typed records of ``records``: a loaded ``Recording``'s own (``typed``), else each
    record (a hand-built list of dicts) validated by ``models`` as the loader would."""
    typed = getattr(records, "typed", None)
    if typed is not None and len(typed) == len(records):
        return typed
    return [r if isinstance(r, BaseModel) else _record(Path("<records>"), n, r, models(r)) for n, r in enumerate(records, 1)]


def _first(p: Path, n: int, data: dict[str, Any],
           schemas: Mapping[str, RecordingSchema]) -> tuple[dict[str, Any], str, ModelsFor, BaseModel]:
    """The header (it must come first), validated by its schema's models; its family, models and typed record."""
    from specstate.schema._recording_checks import check_header, family_of_schema

    if data.get("ev") != "header":
        raise RecordingFormatError(f"{p}: line {n}: expected the header record (ev: header) first but got ev "
                                   f"{printable(shorten(data.get('ev'), 40))}")
    family_of_schema(p, data.get("schema"), schemas)
    release = schemas[data["schema"]]
    models = release.record_models()
    typed = _record(p, n, data, models(data))
    return data, check_header(p, data, release), models, typed


def _records(p: Path, schemas: Mapping[str, RecordingSchema]) -> Recording:
    """Each line validated by the models of its recording's schema (``schemas``); the header
    checked and the order kept (``_recording_checks.py``)."""
    from specstate.schema._recording_checks import RecordOrder

    out = Recording()
    order: RecordOrder | None = None
    models: ModelsFor = lambda data: {}  # noqa: E731  (replaced by the header's)
    for n, line in read_lines(p, what="recording", error=RecordingFormatError):
        data = _parse(p, n, line)
        if order is None:
            out.header, out.family, models, typed = _first(p, n, data, schemas)
            order, record = RecordOrder(p, schemas[out.header["schema"]]), out.header
        elif data.get("ev") == "header":
            raise RecordingFormatError(f"{p}: line {n}: a second header record: expected one recording per file, "
                                       f"its header first")
        else:
            record, typed = data, _record(p, n, data, models(data))
        order.see(n, record)
        out.append(record)
        out.typed.append(typed)
    return out


def read_recording(path: Path | str, schemas: Mapping[str, RecordingSchema]) -> Recording:
    """Every record of ``path`` (``.jsonl`` or ``.jsonl.gz``), validated by the release its
    schema names in ``schemas`` (module doc)."""
    p = Path(path)
    out = _records(p, schemas)
    if not out:
        raise RecordingFormatError(f"{p}: expected a specstate recording with a header record but it has no records")
    return out


#: the loader with every release's schemas, now the integration's (it sees the catalog)
load_recording = moved_function("specstate.schema.load_recording", "specstate.integration.compare:load_records")
