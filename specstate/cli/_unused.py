"""Options that would do nothing in a combination are refused, never accepted without a word.

``given(args)`` is the set of options the user wrote on the command line (their ``dest``), told
apart from defaults by parsing the command's words once more with every default suppressed (the
words parsed once already, so this parse cannot fail). ``refuse_unused(args, rules)`` takes the
command's rules, each ``(dests, used, why)``: when any of ``dests`` was given where ``used`` is
false, one ``UsageError`` line names the options and why they would do nothing (exit 2).
"""

from __future__ import annotations

import argparse
from typing import Iterable, Sequence

from specstate.errors import UsageError

__all__ = ["given", "refuse_unused", "remember_words"]


def remember_words(args: argparse.Namespace, parser: argparse.ArgumentParser, words: Sequence[str]) -> None:
    """Keep what ``given`` needs: the command's parser and the words after the command's name."""
    args.command_parser_words = (parser, list(words))


def given(args: argparse.Namespace) -> frozenset[str]:
    """The ``dest`` of every option given on the command line (empty when not called by ``main``)."""
    parser, words = getattr(args, "command_parser_words", (None, []))
    if parser is None:
        return frozenset()
    actions = [a for a in parser._actions if a.option_strings or a.nargs in ("?", "*")]
    saved = [(a, a.default) for a in actions]
    defaults = dict(parser._defaults)
    try:
        for a in actions:
            a.default = argparse.SUPPRESS
        parser._defaults.clear()
        seen = parser.parse_args(words)
    finally:
        for a, d in saved:
            a.default = d
        parser._defaults.update(defaults)
    return frozenset(k for a in actions if (k := a.dest) in vars(seen))


def _flag(parser: argparse.ArgumentParser | None, dest: str) -> str:
    for a in parser._actions if parser is not None else ():
        if a.dest == dest and a.option_strings:
            return max(a.option_strings, key=len) if not isinstance(a, argparse.BooleanOptionalAction) \
                else a.option_strings[0] + " / " + a.option_strings[1]
    return "--" + dest.replace("_", "-")


def refuse_unused(args: argparse.Namespace, rules: Iterable[tuple[Sequence[str], bool, str]]) -> None:
    """One ``UsageError`` for the first rule whose options were given where they do nothing."""
    have = given(args)
    parser = getattr(args, "command_parser_words", (None, []))[0]
    for dests, used, why in rules:
        unused = [_flag(parser, d) for d in dests if d in have]
        if unused and not used:
            raise UsageError(f"{', '.join(unused)}: {why}; drop {'them' if len(unused) > 1 else 'it'}")
