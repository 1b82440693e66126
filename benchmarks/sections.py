"""A benchmark's section of docs/performance.md: written into the page between its markers
(``<!-- name -->`` ... ``<!-- /name -->``), its figures saved beside the page. ``users.py``,
``detection.py``, ``explore_reduction.py`` and ``python -m benchmarks`` write their sections here."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["put_section", "save_section", "usage"]


def usage(argv: list[str], doc: str | None, flags: dict[str, bool]) -> int | None:
    """A benchmark's command line, checked before it measures anything (a run takes minutes to
    most of an hour): ``-h`` / ``--help`` prints ``doc`` (exit 0); a flag not in ``flags`` (name ->
    takes a value) is one error line (exit 2). ``None``: go on."""
    if "-h" in argv or "--help" in argv:
        print(doc or "")
        return 0
    i = 0
    while i < len(argv):
        a = argv[i]
        if a not in flags:
            print(f"error: unknown argument {a!r} (known: {', '.join(sorted(flags))}; --help)", file=sys.stderr)
            return 2
        if flags[a] and (i + 1 >= len(argv) or argv[i + 1].startswith("--")):
            print(f"error: {a} expects a value", file=sys.stderr)
            return 2
        i += 2 if flags[a] else 1
    return None


def put_section(page: Path, section: str) -> None:
    """Replace the page's section marked as ``section`` is (its first line, ``<!-- name -->``, and
    ``<!-- /name -->``), or append it: a section written again replaces the one before it, and
    every earlier copy of it is dropped."""
    begin = section.split("\n", 1)[0].strip()
    if not (begin.startswith("<!-- ") and begin.endswith(" -->")):
        raise ValueError(f"Expected a section starting with its marker '<!-- name -->' but got {begin!r}")
    end = f"<!-- /{begin[5:-4]} -->"
    text = page.read_text() if page.exists() else ""
    at = None  # where the first copy stood
    while begin in text and end in text.split(begin, 1)[1]:
        head, rest = text.split(begin, 1)
        at = len(head.rstrip("\n")) if at is None else at
        text = head.rstrip("\n") + "\n\n" + rest.split(end, 1)[1].lstrip("\n")
    at = len(text.rstrip("\n")) if at is None else at
    tail = text[at:].strip("\n")
    page.write_text(text[:at] + "\n\n" + section.strip("\n") + "\n" + ("\n" + tail + "\n" if tail else ""))


def save_section(page: Path, suffix: str, fig: dict[str, Any], section: str) -> None:
    """The figures beside the page (``page`` with ``suffix``), the section into the page, and printed."""
    page.with_suffix(suffix).write_text(json.dumps(fig, indent=1))
    put_section(page, section)
    print(section)
