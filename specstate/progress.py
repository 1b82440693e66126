"""Progress on stderr for anything that can take more than a few seconds.

One helper over ``tqdm``: :func:`progress_bar` opens a bar (or a counter when the total is
unknown) on ``sys.stderr``. It is off when stderr is not a terminal (CI logs, pipes, pytest's
capture) and when the caller passes ``enabled=False`` (the CLI's ``--quiet``), so it never
changes what a command prints on stdout or in a log. :func:`track` wraps an iterable
(``for rec in track(records, "conform", quiet=args.quiet)``); ``integration/`` uses it for
``conform`` on a large recording.

The bar is a side channel: nothing reads it back, and output that tests compare never
contains it.
"""

from __future__ import annotations

import sys
from typing import Iterable, Iterator, TypeVar

from tqdm import tqdm

__all__ = ["progress_bar", "track", "enabled_on_stderr"]

T = TypeVar("T")


def enabled_on_stderr(*, quiet: bool = False) -> bool:
    """Progress is shown only on an interactive stderr and without ``--quiet``."""
    isatty = getattr(sys.stderr, "isatty", None)
    return not quiet and bool(isatty and isatty())


def progress_bar(desc: str, *, total: int | None = None, unit: str = "it", quiet: bool = False) -> tqdm:
    """A ``tqdm`` bar on stderr (a no-op object when progress is off); use as a context manager."""
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=not enabled_on_stderr(quiet=quiet),
                leave=False, dynamic_ncols=True, mininterval=0.5)


def track(items: Iterable[T], desc: str, *, total: int | None = None, unit: str = "it",
          quiet: bool = False) -> Iterator[T]:
    """Iterate ``items`` with a progress bar on stderr (see :func:`progress_bar`)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with progress_bar(desc, total=total, unit=unit, quiet=quiet) as bar:
        for item in items:
            yield item
            bar.update(1)
