"""``specstate.testing.check``: ``specstate check`` from Python, for a team's own test suite.

``check(flags, variant=...)`` reads the launch (a string as a shell would split it, a whole
``python -m sglang.launch_server ...`` line included, or a list of words; or ``config_file``),
runs the parts of ``specstate check`` on its config and returns a ``CheckResult``: ``ok``, the
first violation, the trace file and the command that reproduces it; ``details["parts"]`` holds
each part's verdict. Wrong flags raise ``specstate.errors.UsageError`` (one line naming the flag,
the value and what the release accepts); a violation is the result, never an exception.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from specstate.check_result import CheckResult

__all__ = ["check"]


class _Default:
    """The default of ``budget_s`` and ``seed``: told apart from a value given, as the CLI tells
    ``--budget`` / ``--seed`` given from left out (both steer the fuzz part only)."""

    def __init__(self, value: float) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"{self.value!r} (the default)"


_BUDGET_S = _Default(30.0)  #: ``launch_check.DEFAULT_BUDGET_S``
_SEED = _Default(0)


def _variant(variant: object, engine: object) -> str:
    """``--variant`` / ``--engine`` as the CLI resolves them, each checked first."""
    import argparse

    from specstate._engine_option import resolve_variant
    from specstate.schema import _arguments as arg

    family = _engine("engine", engine)
    if variant is not None:
        arg.variant_name("variant", variant)
    ns = argparse.Namespace(variant=variant, engine=family)
    return resolve_variant(ns, "fixed-threshold") or "fixed-threshold"


def _engine(name: str, value: object) -> str | None:
    """``None``, or what ``--engine`` takes (a family's name, or a release one family stands for:
    ``0.5.12.post1`` -> ``sglang-0.5.12``), as the family's name."""
    import argparse

    from specstate._engine_option import ENGINES, _engine_arg
    from specstate.errors import InvalidArgument
    from specstate.schema._arguments import _got

    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"Expected None or an engine from {', '.join(ENGINES)} but got {_got(name, value)}")
    try:
        return _engine_arg(ENGINES)(value)
    except argparse.ArgumentTypeError as e:
        raise InvalidArgument(f"Expected {name} from {', '.join(ENGINES)} or one of their releases but got "
                              f"{_got(name, value)}: {' '.join(str(e).split())[:200]}") from None


def _check_arguments(flags: object, config_file: object, budget_s: object, seed: object, parts: object,
                     failures: object, quiet: object) -> tuple[str | tuple[str, ...] | None, tuple[str, ...]]:
    """Every argument within the CLI's bounds (``specstate check --budget/--seed/--parts``):
    one ``InvalidArgument`` naming the first that is not. The flags and the parts, normalised."""
    from specstate.errors import UsageError
    from specstate.launch_check import PARTS
    from specstate.schema import _arguments as arg

    words = arg.launch_words("flags", flags)
    if config_file is not None:
        arg.file_path("config_file", config_file)
    if words in (None, (), "") and config_file is None:
        raise UsageError("Expected the launch to check: flags=..., or config_file=...")
    if not isinstance(budget_s, _Default):
        arg.seconds("budget_s", budget_s, *arg.BUDGET_S)
    if not isinstance(seed, _Default):
        arg.integer("seed", seed, *arg.LIMITS["check_seed"])
    chosen = arg.names("parts", parts, PARTS)
    arg.folder("failures", failures)
    arg.boolean("quiet", quiet)
    return words, chosen


def check(flags: str | Sequence[str] | None = None, *, variant: str | None = None, engine: str | None = None,
          config_file: Path | str | None = None, budget_s: float = _BUDGET_S, seed: int = _SEED,  # type: ignore[assignment]
          parts: Sequence[str] = ("start", "sweep", "fuzz", "prove"), failures: Path | str | None = None,
          quiet: bool = True, model_config: Path | str | None = None, gpu: str | None = None) -> CheckResult:
    """Check one launch of ``variant`` (or ``engine``'s default variant, else ``fixed-threshold``).
    Every argument is checked first, with ``specstate check``'s bounds (``InvalidArgument``);
    ``budget_s`` and ``seed`` steer the fuzz part only: given with ``parts`` that run no fuzz
    they are refused, as ``--budget`` / ``--seed`` are. A failures folder the call created and
    left empty (nothing failed, or the call was refused) is removed. ``model_config`` and ``gpu``:
    ``specstate check --model-config PATH --gpu NAME`` (what sglang derives from them)."""
    from specstate.fuzz.trace import remove_empty_failure_dirs
    from specstate.server_args import deployment_of

    try:
        deployment = deployment_of(model_config, gpu)
        return _check(flags, variant, engine, config_file, budget_s, seed, parts, failures, quiet, deployment)
    finally:
        remove_empty_failure_dirs()


def _check(flags: object, variant: object, engine: object, config_file: object, budget_s: object, seed: object,
           parts: object, failures: object, quiet: object, deployment: object = None) -> CheckResult:
    from specstate.launch_check import check_launch
    from specstate.server_args import launch_tokens, parse_launch

    words_or_text, chosen = _check_arguments(flags, config_file, budget_s, seed, parts, failures, quiet)
    budget_s, seed = _fuzz_options(budget_s, seed, chosen)
    name = _variant(variant, engine)
    words: tuple[str, ...] = ()
    text: str | None = None
    if isinstance(words_or_text, str):
        text = words_or_text
    else:
        words = tuple(words_or_text or ())
    # config_file: a path, checked by _check_arguments (arg.file_path)
    tokens = launch_tokens(after_dashes=words, server_args=text, config_file=config_file, variant=name)  # type: ignore[arg-type]
    launch = parse_launch(tokens, name, deployment, read_model_path=True)  # type: ignore[arg-type]
    return check_launch(launch, budget_s=float(budget_s), seed=seed, parts=chosen, failures=failures,  # type: ignore[arg-type]
                        quiet=quiet)


def _fuzz_options(budget_s: object, seed: object, parts: tuple[str, ...]) -> tuple[object, object]:
    """``budget_s`` and ``seed`` given without the fuzz part would do nothing: one
    ``InvalidArgument`` naming them (``specstate check`` refuses ``--budget`` / ``--seed`` alike);
    then the defaults filled in."""
    from specstate.errors import InvalidArgument

    given = [n for n, v in (("budget_s", budget_s), ("seed", seed)) if not isinstance(v, _Default)]
    if given and "fuzz" not in parts:
        raise InvalidArgument(f"{', '.join(given)}: the fuzz part's options, but parts={list(parts)!r} runs no fuzz: "
                              f"add 'fuzz' to parts, or drop {'them' if len(given) > 1 else 'it'}")
    return (budget_s.value if isinstance(budget_s, _Default) else budget_s,
            seed.value if isinstance(seed, _Default) else seed)
