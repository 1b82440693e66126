"""The model's release folders, found by name: ``specstate/model/sglang_X_Y_Z/`` holds the family
``sglang-X.Y.Z`` (docs/architecture.md, "Adding a release"); ``vllm_X_Y_Z/`` the vLLM family
``vllm-X.Y.Z`` (docs/vllm.md: its own state machine, not in the SGLang ``Family`` registry).

Read from the directory, importing no release, so the ``--engine`` choices are known before any
family is (building the parser stays light), and the files whose citations are a release's are
known from its folder. What a release's files are besides its folder, it says itself: a
``CITED_OUTSIDE`` tuple of repository paths in its package ``__init__`` (read by ``cited_outside``,
which imports that package). The shared core's family is the oldest release that derives from no
other: its functions are the ``Ops`` table's defaults, so the core's citations are its. A release
derived from a newer one (0.5.9 over 0.5.12) says so in its package ``__init__`` (``BASE =
"sglang-0.5.12"``, read here as text, importing nothing), so an older derived release does not
become the core.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
from pathlib import Path

__all__ = ["MODEL_DIR", "release_folders", "family_of_release", "family_of_folder", "core_family", "core_of",
           "declared_base", "cited_outside", "is_sglang_family", "ENGINE_PREFIXES"]

MODEL_DIR = Path(__file__).parent
#: a release folder: ``sglang_0_5_17``, or another engine's: ``vllm_0_34_0`` (``ENGINE_PREFIXES``)
_FOLDER = re.compile(r"(?:sglang|vllm)(?:_\d+)+")
#: the engines whose release folders the model holds; SGLang's first (the shared core is SGLang's)
ENGINE_PREFIXES: tuple[str, ...] = ("sglang", "vllm")


def family_of_release(release: str) -> str:
    """``0.5.17`` -> ``sglang-0.5.17`` (``Family.source_release`` the other way)."""
    return f"sglang-{release}"


def family_of_folder(name: str) -> str:
    """``sglang_0_5_17`` -> ``sglang-0.5.17``; ``vllm_0_34_0`` -> ``vllm-0.34.0``."""
    engine, _, version = name.partition("_")
    return f"{engine}-{version.replace('_', '.')}"


def is_sglang_family(name: str) -> bool:
    """Whether a family name (``--engine`` choice) is an SGLang release's (the ``Family`` registry's);
    ``vllm-0.34.0`` is not: its model is its own state machine (``specstate/model/vllm_0_34_0/``)."""
    return name.startswith("sglang-")


def release_folders(model_dir: Path = MODEL_DIR) -> dict[str, Path]:
    """Family name -> its folder, for every release package of ``model_dir``, oldest release first."""
    found = [d for d in model_dir.iterdir() if d.is_dir() and _FOLDER.fullmatch(d.name) and (d / "__init__.py").is_file()]
    found.sort(key=lambda d: (ENGINE_PREFIXES.index(d.name.split("_")[0]), tuple(int(x) for x in d.name.split("_")[1:])))
    return {family_of_folder(d.name): d for d in found}


def declared_base(folder: Path) -> str | None:
    """The family a release folder derives from, as its ``__init__.py`` declares it (``BASE = "..."``,
    a top-level string assignment read with ``ast``); ``None``: it declares none."""
    tree = ast.parse((folder / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "BASE" for t in node.targets) \
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return node.value.value
    return None


def core_of(folders: dict[str, Path]) -> str:
    """Of ``release_folders``' answer: the oldest release that declares no base (the shared core's)."""
    return next(name for name, d in folders.items() if declared_base(d) is None)


@functools.cache
def core_family() -> str:
    """The shared core's family: the oldest release that derives from no other (a variant with no
    base and no family models it)."""
    return core_of(release_folders())


def cited_outside(folder: Path) -> tuple[str, ...]:
    """The repository paths outside ``folder`` whose citations are its release's (its package's
    ``CITED_OUTSIDE``; empty when it has none)."""
    package = importlib.import_module(f"specstate.model.{folder.name}")
    return tuple(getattr(package, "CITED_OUTSIDE", ()))
