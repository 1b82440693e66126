"""Where the oracle's private temporary folders go (both the one-rank child and the N-rank parent)."""

from __future__ import annotations

import os
import tempfile

__all__ = ["socket_base"]

#: a UNIX socket's path holds at most 107 bytes (``sun_path``); upstream names its ZMQ ``ipc://``
#: sockets in the temporary folder (``tmpXXXXXXXX``), so ours must leave room for that
_SOCKET_PATH_MAX = 107


def socket_base() -> str:
    """The folder the oracle's private folders go in: ``$TMPDIR`` (``tempfile.gettempdir``), or
    ``/tmp`` where ``$TMPDIR`` is so long that upstream's socket names in a private folder there
    would not fit a UNIX socket path (CI's pytest-xdist folders did: ``ZMQError: File name too
    long``); the folder is removed at exit either way."""
    base = tempfile.gettempdir()
    room = len(os.path.join(base, "specstate-oracle-dp-XXXXXXXX", "0-tmpXXXXXXXX-XXXXXXXX"))
    if room > _SOCKET_PATH_MAX and os.path.isdir("/tmp") and os.access("/tmp", os.W_OK | os.X_OK):
        return "/tmp"
    return base
