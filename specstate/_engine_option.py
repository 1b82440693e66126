"""``--engine``: run a command on an engine family's default variant (``specstate.model.families``).

``specstate run --engine sglang-0.5.17`` runs ``upstream-adaptive``; ``--variant`` names a variant
directly (its own family); both together must agree. The choices are the release folders of
``specstate/model/`` (``sglang_X_Y_Z/`` is the family ``sglang-X.Y.Z``: ``model/releases.py``), read
from the directory: building the parser imports no release, and a new release's folder is a new choice
(``tests/test_engine_option.py`` holds them to the catalog's families).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specstate.errors import UsageError

if TYPE_CHECKING:
    from specstate.model.releases import Release
    from specstate.server_args import Deployment

__all__ = ["ENGINES", "engines", "add_engine_option", "resolve_variant", "add_server_args_options", "has_launch",
           "resolve_launch", "deployment_arg", "own_model_release", "is_vllm", "refuse_vllm", "VLLM_NOT_MODELLED"]

#: what the vLLM family (its release folders: ``own_model_release``) does not model for the commands that
#: model SGLang only; ``run``, ``fuzz``, ``reproduce`` and ``check`` take vLLM (``specstate/cli/vllm.py``)
VLLM_NOT_MODELLED = {
    "explore": "the BFS needs an abstract key and a finite action alphabet of the state, and vLLM's VState has "
               "neither",
    "graph": "the state graph is explore's BFS, and vLLM's VState has no abstract key or action alphabet",
    "prove": "the batch-size proof needs an abstraction of the state over every batch size, and vLLM's has none",
    "minimize": "its traces are shrunk by check, run and fuzz themselves",
}

def engines(model_dir: Path | None = None) -> tuple[str, ...]:
    """The engine families, one per release folder of ``model_dir`` (``specstate/model/``), oldest first."""
    from specstate.model.releases import MODEL_DIR, release_folders

    return tuple(release_folders(model_dir or MODEL_DIR))


ENGINES = engines()


def add_engine_option(p: argparse.ArgumentParser, *, allow_all: bool = False) -> None:
    """``--engine``; ``allow_all``: also ``all``, every family (``specstate/cli/across.py``)."""
    choices = ENGINES + (("all",) if allow_all else ())
    p.add_argument("--engine", type=_engine_arg(choices), metavar="{" + ",".join(choices) + "}", default=None,
                   help="engine family: its default variant (`specstate engines` lists them) unless --variant "
                        "is given" + ("; all: every family, one table" if allow_all else ""))


def _engine_arg(choices: tuple[str, ...]):  # noqa: ANN202
    """A family's name, or a release one family stands for (``0.5.12.post1``, ``0.5.17``) -> its family.
    Any other release is a usage error that says where it lies between the families
    (``model/release_gap.py``); anything else one naming the choices."""

    def parse(value: str) -> str:
        if value in choices:
            return value
        from specstate.model.release_gap import describe_unmodelled, family_for_release

        if (family := family_for_release(value)) is not None and family in choices:
            return family
        shown = repr(value) if len(value) <= 60 else repr(value[:57]) + "..."
        raise argparse.ArgumentTypeError(describe_unmodelled(value) or f"invalid choice: {shown} (choose from "
                                         f"{', '.join(repr(c) for c in choices)})")

    return parse


def resolve_variant(args: argparse.Namespace, fallback: str | None) -> str | None:
    """``--variant``, else ``--engine``'s default variant, else ``fallback``; sets ``args.variant``. A
    variant of another family is the engine's own ``NAME@ENGINE`` where the engine registers one
    (a family derived from the variant's: ``--engine sglang-0.5.9 --variant seed-patch``)."""
    engine = getattr(args, "engine", None)
    variant = args.variant
    if is_vllm(args):  # a command that models SGLang only (run, fuzz, reproduce and check hand vLLM over first)
        refuse_vllm(args)
    if engine is not None:
        from specstate.model import get_variant, variant_names
        from specstate.model.families import get_family

        family = get_family(engine)
        if variant is None:
            variant = family.default_variant
        elif (theirs := get_variant(variant).family_name) != engine and f"{variant}@{engine}" in variant_names():
            variant = f"{variant}@{engine}"  # the engine's own version of its base's variant (sglang-0.5.9's)
        elif theirs != engine:
            raise UsageError(f"Expected a variant of --engine {engine} but got --variant {variant} "
                                  f"(family {theirs})")
    args.variant = variant if variant is not None else fallback
    return args.variant


# -- the user's launch flags ---------------------------------------------------------------
# ``specstate CMD [options] -- <flags or a whole launch line>``, ``--server-args "..."`` or
# ``--config F``: the config the command runs (``specstate.server_args``). ``cli.main`` puts the
# words after ``--`` in ``args.server_argv``.


def add_server_args_options(p: argparse.ArgumentParser) -> None:
    """``--server-args`` and ``--config`` (and, after ``--``, the flags themselves)."""
    p.add_argument("--server-args", default=None, metavar="FLAGS",
                   help="sglang launch flags as one string, e.g. \"--speculative-algorithm EAGLE3 ...\" "
                        "(or put them, or a whole 'python -m sglang.launch_server ...' line, after --)")
    p.add_argument("--config", dest="server_config", default=None, metavar="F",
                   help="sglang launch flags from a JSON or TOML file (keys: flag or ServerArgs field names)")
    p.add_argument("--model-config", default=None, metavar="PATH",
                   help="your model's config.json (or its folder): sglang derives the attention backend, page size, "
                        "context length and draft shape from it (default: 4096 tokens, page size 1, assumed)")
    p.add_argument("--gpu", default=None, metavar="NAME",
                   help="the GPU sglang runs on (H200, H100, H20, A100, A100-40GB, B200, L40S, L4, A10): its "
                        "chunk and CUDA-graph defaults and backend (default: an H200's, assumed)")
    p.set_defaults(takes_server_flags=True)


def deployment_arg(args: argparse.Namespace | None) -> "Deployment | None":
    """The ``server_args.Deployment`` of ``--model-config`` and ``--gpu`` (``None``: neither given)."""
    from specstate.server_args import deployment_of

    if args is None:
        return None
    return deployment_of(getattr(args, "model_config", None), getattr(args, "gpu", None))


def own_model_release(args: argparse.Namespace) -> "Release | None":
    """The release, of an engine with a model of its own (vLLM's: ``Release.has_own_model``), the command
    is for, each release asked by folder (``own_model_releases`` of ``model/releases.py``, newest first):
    ``--engine`` naming it; else the one whose launch part recognises the line after ``--``
    (``is_serve``: ``vllm serve ...``, argv[0..1]); else, unless ``--engine`` is an SGLang family's, the
    one whose built-in variants hold ``--variant`` (``variant_names``). ``None``: an SGLang command."""
    from specstate.model.releases import is_sglang_family, own_model_releases

    found = own_model_releases()
    engine = getattr(args, "engine", None)
    named = [r for r in found if r.name == engine]
    if named:
        return named[0]
    argv = getattr(args, "server_argv", None) or ()
    for r in found:
        if _launch_part(r).is_serve(argv):
            return r
    variant = getattr(args, "variant", None)
    if variant and ":" not in variant and not (engine and is_sglang_family(engine)):
        for r in found:
            if variant in _launch_part(r).variant_names():
                return r
    return None


def _launch_part(release: "Release") -> Any:  # noqa: ANN401 - the release's launch module
    part = release.part("launch")
    if part is None:
        raise UsageError(f"{release.name}: its folder has no launch part (launch.py)")
    return part


def is_vllm(args: argparse.Namespace) -> bool:
    """The command is for an engine with a model of its own (``own_model_release``: vLLM's)."""
    return own_model_release(args) is not None


def refuse_vllm(args: argparse.Namespace) -> None:
    """The one-line usage error (exit 2) of a command that models SGLang only, given vLLM."""
    from specstate.model.releases import own_model_releases

    command = getattr(args, "command", None) or "this command"
    what = VLLM_NOT_MODELLED.get(command, "this command models SGLang only")
    release = own_model_release(args) or own_model_releases()[0]
    raise UsageError(f"{command}: not modelled for vLLM ({release.name}): {what}; judge a vLLM launch with `specstate "
                     f"check|run|fuzz -- vllm serve MODEL ...` and a trace with `specstate reproduce TRACE.json` "
                     f"(docs/vllm.md)")


def has_launch(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "server_argv", None)) or getattr(args, "server_args", None) is not None \
        or getattr(args, "server_config", None) is not None


def resolve_launch(args: argparse.Namespace, *, err=None):  # noqa: ANN001, ANN201
    """The ``Launch`` of the command's flags (``None`` when none were given); needs
    ``args.variant`` resolved. Lists the flags that are not modelled once on stderr."""
    import sys

    from specstate.server_args import launch_tokens, parse_launch

    if is_vllm(args):
        refuse_vllm(args)
    if not has_launch(args):
        given = [o for o, k in (("--model-config", "model_config"), ("--gpu", "gpu")) if getattr(args, k, None)]
        if given:
            raise UsageError(f"{', '.join(given)}: what sglang derives for a launch; give the launch's flags too "
                             "(after --, --server-args \"...\", or --config F)")
        args.launch = None
        return None
    tokens = launch_tokens(after_dashes=getattr(args, "server_argv", None) or (),
                           server_args=getattr(args, "server_args", None),
                           config_file=getattr(args, "server_config", None), variant=args.variant)
    launch = parse_launch(tokens, args.variant, deployment_arg(args), read_model_path=True)
    out = err or sys.stderr
    c = launch.coverage
    for x in c.get("not_judged", ()):
        print(f"specstate: not judged: {x.get('flag') or x.get('what')}: {x['reason']}", file=out)
    if c.get("unaffected"):
        print(f"specstate: not modelled (accepted; checked to change nothing the model holds): "
              f"{', '.join(c['unaffected'])}", file=out)
    if c.get("not_examined"):
        print(f"specstate: not modelled (accepted; not examined: their effect on the batch is not derived): "
              f"{', '.join(c['not_examined'])}", file=out)
    for e in c.get("environment", ()):
        print(f"specstate: environment {e['name']}={e['value']}: {'applied: ' if e['applied'] else ''}{e['note']}",
              file=out)
    for note in launch.notes:
        print(f"specstate: {note}", file=out)
    for d in (x for x in c.get("derived", ()) if x["setting"] in ("attention_backend", "page_size")):  # others: notes
        print(f"specstate: derived {d['setting']} = {d['value']}: {d['source']}", file=out)
    args.launch = launch
    return launch
