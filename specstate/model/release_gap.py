"""What ``--engine`` answers for an sglang release that has no family of its own.

A user names the release they run (``--engine sglang-0.5.20``). Where it is a family's, the
family runs. Where it lies between two families, the answer names both and, from the later
family's declared changes (``Family.changes``: each override with the first release that ships
it), which of those changes the user's release already has and which it has not: the two
families bound what the model can say for it, and the changes tell which one is nearer. A
release older than every family, or newer than the newest, is said to be so. Nothing here runs
the model; the families are imported only when this is asked (``--engine``'s parsing stays light).
"""

from __future__ import annotations

import re

__all__ = ["parse_release", "family_for_release", "describe_unmodelled"]

#: each component at most 9 digits (``int()`` of a 4,300-digit component raises), 8 components at most
_RELEASE = re.compile(r"(?:sglang-)?(\d{1,9}(?:\.\d{1,9}){1,7})(?:\.post\d{1,9})?")


def parse_release(text: str) -> tuple[int, ...] | None:
    """``sglang-0.5.20`` / ``0.5.20`` / ``0.5.20.post1`` -> ``(0, 5, 20)``; ``None`` for anything else."""
    m = _RELEASE.fullmatch(text.strip())
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def _families() -> list:  # noqa: ANN202  (Family objects)
    """Every registered family (importing the catalog registers the built-in ones)."""
    from specstate.model.families import family_names, get_family

    return [get_family(n) for n in family_names()]


def _key(release: str) -> tuple[int, ...]:
    return parse_release(release) or ()


def family_for_release(text: str) -> str | None:
    """The family whose releases include ``text`` (``0.5.12.post1``, ``sglang-0.5.17``); ``None``: none."""
    release = text.strip().removeprefix("sglang-")
    if parse_release(release) is None:
        return None
    return next((f.name for f in _families() if release in f.releases), None)


def describe_unmodelled(text: str, *, detail: bool = False) -> str | None:
    """The answer for a release-like ``text`` that names no family, in one line (``detail``: with a
    line per change of the later family); ``None``: ``text`` is no release."""
    wanted = parse_release(text)
    if wanted is None:
        return None
    families = sorted(_families(), key=lambda f: _key(f.source_release))
    shown = text.strip().removeprefix("sglang-")
    if (name := family_for_release(text)) is not None:
        return f"sglang {shown} is modelled by {name}"
    same = [f for f in families if _key(f.source_release) == wanted]
    if same:
        return (f"sglang {shown} is not among the releases checked for {same[0].name} "
                f"({', '.join(same[0].releases)}), the nearest family")
    before = [f for f in families if _key(f.source_release) < wanted]
    after = [f for f in families if _key(f.source_release) > wanted]
    if not before:
        return (f"sglang {shown} is older than every modelled release; the oldest family is {after[0].name} "
                f"(releases {', '.join(after[0].releases)})")
    if not after:
        return (f"sglang {shown} is newer than every modelled release; the newest family is {before[-1].name} "
                f"(releases {', '.join(before[-1].releases)}), whose source is not read for {shown}")
    lower, upper = before[-1], after[0]
    has = [c for c in upper.changes if _key(c.first_release) <= wanted]
    line = (f"sglang {shown} has no family of its own: it lies between {lower.name} (releases "
            f"{', '.join(lower.releases)}) and {upper.name} (releases {', '.join(upper.releases)})")
    if upper.changes:
        line += (f" and ships {len(has)} of the {len(upper.changes)} changes {upper.name} models over "
                 f"{upper.base or lower.name}")
        if not detail:
            line += f" (specstate engines --release {shown} lists them)"
    line += "; --engine all runs every family"
    if not detail:
        return line
    rows = [f"  {'has  ' if c in has else 'lacks'}  {c.first_release}  {c.operation}: {c.summary}"
            for c in upper.changes]
    return "\n".join([line, *rows])
