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
become the core. Read the same way: ``FORMERLY``, the old module paths a release's package was
once at (``formerly_at``: the deprecated path left in the shared code aliases it), and ``WHEELS``,
the sglang wheels it pins (``declared_wheels``, ``Release.wheels``: ``specstate/upstream.py``).
"""

from __future__ import annotations

import ast
import functools
import importlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Mapping

__all__ = ["MODEL_DIR", "release_folders", "family_of_release", "family_of_folder", "core_family", "core_of",
           "declared_base", "formerly_at", "declared_wheels", "cited_outside", "is_sglang_family", "ENGINE_PREFIXES", "Release", "releases",
           "get_release", "each_release_gives", "own_model_releases", "load_releases", "RELEASE_PATH_ENV", "extra_release_dirs"]

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


#: folders (``os.pathsep``-separated) that hold more release folders, each a package
#: ``specstate.model.<folder>`` like the built-in ones (a release kept outside the repository, or built
#: by a test at run time: ``tests/test_trial_release.py``)
RELEASE_PATH_ENV = "SPECSTATE_RELEASE_PATH"


def extra_release_dirs() -> list[Path]:
    """The folders ``SPECSTATE_RELEASE_PATH`` names (read now), each added to ``specstate.model``'s
    package path so that its release folders import as ``specstate.model.<folder>``."""
    dirs = [Path(d) for d in os.environ.get(RELEASE_PATH_ENV, "").split(os.pathsep) if d]
    dirs = [d.resolve() for d in dirs if d.is_dir()]
    package = importlib.import_module("specstate.model")
    for d in dirs:
        if str(d) not in package.__path__:
            package.__path__.append(str(d))
    return dirs


def release_folders(model_dir: Path = MODEL_DIR) -> dict[str, Path]:
    """Family name -> its folder, for every release package of ``model_dir`` and of the folders
    ``SPECSTATE_RELEASE_PATH`` names, oldest release first."""
    found = [d for where in (model_dir, *extra_release_dirs()) for d in where.iterdir()
             if d.is_dir() and _FOLDER.fullmatch(d.name) and (d / "__init__.py").is_file()]
    found.sort(key=lambda d: (ENGINE_PREFIXES.index(d.name.split("_")[0]), tuple(int(x) for x in d.name.split("_")[1:])))
    out: dict[str, Path] = {}
    for d in found:  # a folder of SPECSTATE_RELEASE_PATH named as a built-in one is not read (the built-in imports)
        out.setdefault(family_of_folder(d.name), d)
    return out


def _declared(folder: Path, name: str) -> object:
    """The literal a release folder's ``__init__.py`` binds to ``name`` at its top level (``BASE =
    "..."``, ``FORMERLY = (...)``, ``WHEELS = {...}``), read with ``ast`` (importing nothing);
    ``None``: it binds none."""
    tree = ast.parse((folder / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name \
                and node.value is not None:
            return ast.literal_eval(node.value)
    return None


def declared_base(folder: Path) -> str | None:
    """The family a release folder derives from, as its ``__init__.py`` declares it (``BASE = "..."``,
    a top-level string assignment read with ``ast``); ``None``: it declares none."""
    found = _declared(folder, "BASE")
    return found if isinstance(found, str) else None


def _formerly(folder: Path) -> tuple[str, ...]:
    found = _declared(folder, "FORMERLY")
    return tuple(found) if isinstance(found, (tuple, list)) else ()


def formerly_at(old: str) -> str:
    """The package of the release folder that was once at the module path ``old`` (its ``__init__``
    declares ``FORMERLY = ("old.path", ...)``, read as text): what a deprecated package path left in
    the shared code (``specstate/model/v2/``) aliases, so that path names no release."""
    from specstate.errors import InternalError

    found = [f"specstate.model.{d.name}" for d in release_folders().values() if old in _formerly(d)]
    if len(found) != 1:
        raise InternalError(f"Expected one release folder to declare FORMERLY = ({old!r},) but got {found}")
    return found[0]


def declared_wheels(folder: Path) -> dict[str, tuple[str, str]]:
    """The sglang wheels a release folder pins (its ``__init__``'s ``WHEELS``: release -> (the wheel's
    file name, its sha256)), read as text: its own release's and those its family stands for or was
    reviewed against; empty: it pins none (``specstate/upstream.py`` refuses its release)."""
    found = _declared(folder, "WHEELS")
    if found is None:
        return {}
    if not isinstance(found, dict) or not all(isinstance(k, str) and isinstance(v, tuple) and len(v) == 2 and
                                              all(isinstance(x, str) for x in v) for k, v in found.items()):
        from specstate.errors import InternalError

        raise InternalError(f"Expected {folder.name}'s WHEELS to map a release to (file name, sha256) but got {found!r}")
    return found


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


#: the rooms above the model that hold a part of a release in a folder of the release's name
#: (``specstate/integration/sglang_0_5_17/``: its adapter, recorder, conformance, CPU oracle and
#: worker oracle), where the release's own folder does not hold it
_ROOMS = ("integration",)


@dataclass(frozen=True)
class Release:
    """One release, as the shared code asks it (docs/architecture.md, "Adding a release"): found by
    its folder's name (``specstate/model/sglang_X_Y_Z/``, or one of ``SPECSTATE_RELEASE_PATH``), so
    reading one imports nothing. Every part of it is a question asked here:

    - the model: ``load()`` imports its package and the modules it names in ``REGISTERS`` (its
      family and variants register themselves), ``family`` its ``Family``;
    - its launch flags: ``module("launch")`` (``FLAGS``, ``RULES``; ``server_args`` reads them);
    - its recordings and conformance: ``module("adapter", room="integration")`` (``ADAPTER``);
    - its CPU oracle: ``module("oracle", room="integration")`` (``ORACLE``), its worker oracle
      ``module("worker_oracle", room="integration")`` (``WORKER``);
    - its part of the shared operations' defaults: ``defaults`` (``<folder>/defaults.py``'s ``DEFAULTS``),
      the overlap scheduler's initial part ``overlap_start`` (its ``OVERLAP_START``);
    - its citations: its folder, its page, ``CITED_OUTSIDE``, its ``Family``'s ledger;
    - its pinned upstream wheels: ``wheels`` (its ``__init__``'s ``WHEELS``, read as text);
    - an engine with a model of its own (``has_own_model``: vLLM's): ``part("launch")`` (which launch
      line and variants are its, its default launch and variant), ``part("check", room="integration")``
      (its check, run, fuzz and reproduce): ``own_model_releases``, ``_engine_option.own_model_release``.

    A part is looked for in the release's own folder first (a release kept whole in one folder:
    ``<folder>/adapter.py``, ``<folder>/oracle.py``, ``<folder>/launch.py``), then, for a built-in
    release, in its folder of the same name in ``integration/`` (the parts that import the rooms
    above the model: the adapter, the oracles); the rooms above the model import what it names,
    the model imports none of them (``module`` answers a dotted path)."""

    name: str  #: the family name, ``sglang-0.5.23`` (the ``--engine`` choice)
    folder: Path  #: its model folder

    @property
    def engine(self) -> str:
        return self.name.partition("-")[0]

    @property
    def version(self) -> str:
        """``sglang-0.5.23`` -> ``0.5.23`` (the sglang release, ``Family.source_release``)."""
        return self.name.partition("-")[2]

    @property
    def package(self) -> str:
        return f"specstate.model.{self.folder.name}"

    @property
    def declared_base(self) -> str | None:
        """The base its package declares as text (an older release over a newer one), read without importing."""
        return declared_base(self.folder)

    def module(self, name: str, room: str | None = None) -> str | None:
        """The dotted path of its part ``name``: ``<folder>/<name>.py`` (or a package) of its own
        folder, else (``room``) ``specstate/<room>/<folder>/<name>.py``; ``None``: it has none (it
        keeps its base's). Files are looked at, nothing is imported."""
        if (self.folder / f"{name}.py").is_file() or (self.folder / name / "__init__.py").is_file():
            return f"{self.package}.{name}"
        if room is None:
            return None
        assert room in _ROOMS, room
        if (MODEL_DIR.parent / room / self.folder.name / f"{name}.py").is_file():
            return f"specstate.{room}.{self.folder.name}.{name}"
        return None

    def load(self) -> ModuleType:
        """Import its package and the modules its ``REGISTERS`` names (its family and variants register)."""
        package = importlib.import_module(self.package)
        for sub in getattr(package, "REGISTERS", ()):
            importlib.import_module(f"{self.package}.{sub}")
        return package

    @property
    def family(self) -> Any:
        """Its ``Family`` (the registry's; ``None`` for an engine with a model of its own: vLLM)."""
        if not is_sglang_family(self.name):
            return None
        from specstate.model.family_registry import get_family

        self.load()
        return get_family(self.name)

    @property
    def overrides(self) -> Mapping[str, Callable[..., Any]] | None:
        """Its operations over ``DEFAULT_OPS``: ``OVERRIDES`` of its package or of a module its
        ``REGISTERS`` names; ``None``: it declares none (its default variant's overrides are then
        the table: ``specstate.variant``), the shared core's release (its operations are the
        defaults) and an engine with a model of its own."""
        if self.name == core_family() or not is_sglang_family(self.name):
            return None
        package = self.load()
        for module in (package, *(importlib.import_module(f"{self.package}.{m}") for m in getattr(package, "REGISTERS", ()))):
            found = getattr(module, "OVERRIDES", None)
            if found is not None:
                return found
        return None

    @property
    def defaults(self) -> Mapping[str, Callable[..., Any]]:
        """Its part of the shared ``Ops`` table's defaults (``DEFAULT_OPS``, ``specstate/model/ops.py``):
        ``DEFAULTS`` of its ``defaults.py``, the operations it brings that the shared table holds
        (the core's v1 worker, the overlap release's scheduler and worker); empty: it brings none.
        Imports only that module (and its package), never its family."""
        dotted = self.module("defaults")
        if dotted is None:
            return {}
        return dict(importlib.import_module(dotted).DEFAULTS)

    @property
    def overlap_start(self) -> Callable[..., Any] | None:
        """The overlap scheduler's initial part (``config -> OverlapPart``) when it is the release that
        models it: ``OVERLAP_START`` of its ``defaults.py``; ``None``: it gives none."""
        dotted = self.module("defaults")
        if dotted is None:
            return None
        found: Callable[..., Any] | None = getattr(importlib.import_module(dotted), "OVERLAP_START", None)
        return found

    @property
    def base(self) -> str | None:
        """The family it derives from (its declared ``BASE``, else its ``Family.base``)."""
        fam = self.family
        return self.declared_base or (fam.base if fam is not None else None)

    @property
    def cited_outside(self) -> tuple[str, ...]:
        return cited_outside(self.folder)

    @property
    def has_own_model(self) -> bool:
        """Whether its engine's model is its own state machine (vLLM's), not the SGLang ``Family``
        registry's: the shared commands then ask its parts (``part``) for everything."""
        return not is_sglang_family(self.name)

    def part(self, name: str, room: str | None = None) -> ModuleType | None:
        """Its part ``name`` imported (``module(name, room)``'s answer); ``None``: it has none. An engine
        with a model of its own answers the shared commands here: ``part("launch")`` (``is_serve``,
        ``parse``, ``SERVE``, ``default_launch``, ``DEFAULT_VARIANT``, ``variant_names``),
        ``part("check", room="integration")`` (its check, run, fuzz and reproduce)."""
        dotted = self.module(name, room)
        return None if dotted is None else importlib.import_module(dotted)

    @property
    def wheels(self) -> dict[str, tuple[str, str]]:
        """The sglang wheels it pins (``declared_wheels``; ``specstate/upstream.py`` asks every release)."""
        return declared_wheels(self.folder)


def _load_order(r: Release) -> tuple[bool, tuple[int, ...]]:
    """A release that declares a base older than it (``BASE``) registers after those that do not."""
    return r.declared_base is not None, tuple(int(x) for x in r.version.split("."))


def releases(engine: str | None = "sglang") -> tuple[Release, ...]:
    """Every release of ``engine`` (``None``: every engine), oldest first, found by folder name."""
    return tuple(Release(n, d) for n, d in release_folders().items() if engine is None or n.startswith(f"{engine}-"))


def each_release_gives(part: Callable[[Release], Mapping[str, Any]], what: str) -> dict[str, Any]:
    """The union of every sglang release's ``part`` (its ``defaults``, its ``wheels``), oldest first;
    a key two releases give is an internal error naming the release that gives it again (``what``
    says what is given once: ``"default operation"``, ``"sglang wheel"``)."""
    from specstate.errors import InternalError

    out: dict[str, Any] = {}
    for release in releases():
        given = part(release)
        twice = sorted(set(given) & set(out))
        if twice:
            raise InternalError(f"Expected each {what} from one release folder but {release.name} gives {twice} again")
        out.update(given)
    return out


def own_model_releases() -> tuple[Release, ...]:
    """The releases of every engine whose model is its own state machine (``Release.has_own_model``:
    vLLM's), newest first (a launch line two of them recognise is the newest's). Reads folders only."""
    return tuple(reversed([r for r in releases(None) if r.has_own_model]))


def get_release(name: str) -> Release:
    """The release of the family ``name`` (``sglang-0.5.23``) or of the release ``0.5.23``."""
    from specstate.errors import UnknownName

    found = {r.name: r for r in releases(None)}
    key = name if name in found else family_of_release(name)
    if key not in found:
        raise UnknownName(f"Expected a release from {', '.join(found)} but got {name!r}")
    return found[key]


def load_releases() -> tuple[Release, ...]:
    """Import every SGLang release (the catalogs' one loop): each registers its family and variants;
    a release that declares an older-over-newer ``BASE`` after the others."""
    out = tuple(sorted(releases(), key=_load_order))
    for r in out:
        r.load()
    return out
