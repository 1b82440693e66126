"""An exception as the worker oracle compares it, on either side: its class, the sizes a size
error names (``a`` vs ``b`` of PyTorch's ``The size of tensor a (A) must match the size of tensor b
(B)``), the type and attribute an ``AttributeError`` names, and the function it was raised under.
The message is kept for the report only; two exceptions agree when everything else does."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["error_signature", "comparable"]

_SIZES = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)")
_ATTRIBUTE = re.compile(r"'(\w+)' object has no attribute '(\w+)'")


def error_signature(error_class: str, message: str, stage: str) -> dict[str, Any]:
    out: dict[str, Any] = {"class": error_class, "stage": stage, "message": message[:500]}
    sizes = _SIZES.search(message)
    if sizes:
        out["sizes"] = [int(sizes.group(1)), int(sizes.group(2))]
    attribute = _ATTRIBUTE.search(message)
    if error_class == "AttributeError" and attribute:
        out["attribute"] = [attribute.group(1), attribute.group(2)]
    return out


def comparable(signature: dict[str, Any] | None) -> dict[str, Any] | None:
    """What must be equal: everything but the message."""
    if signature is None:
        return None
    return {k: v for k, v in signature.items() if k != "message"}
