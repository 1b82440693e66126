"""Children that get signals the way a user's terminal delivers them.

A test run started with SIGINT ignored (a background job of a non-interactive shell, as
``cmd &`` in a script, or under some CI runners) hands that to every child, and Python keeps an
inherited ignore: the child never sees the Ctrl-C the test sends and runs to its end. The tests
that send SIGINT start their children with it at its default (``preexec_fn=default_sigint``).
"""

from __future__ import annotations

import signal

__all__ = ["default_sigint"]


def default_sigint() -> None:
    """In the child, before ``exec``: SIGINT at its default (Python installs its handler then)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
