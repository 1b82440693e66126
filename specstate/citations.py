"""Citations against sglang's source, release by release.

Owns: which file::symbol citations each engine family makes (``citations_of``), the
fingerprint of a cited symbol in one release's source (``fingerprint``: its AST with docstrings
stripped, so a comment or a docstring edit is no change), and the release-range check
(``check_family``): every citation of a family must name a symbol that exists, and is unchanged,
in every release of the family's declared range (``Family.releases``) compared with the release
the family cites (``Family.source_release``). A derived family (``Family.base``) also inherits the
citations in force for its base that it does not override (``in_force``: the base's own, and what
the base keeps of its own base, and so on to the root of the chain: 0.5.23 over 0.5.17, a release
over 0.5.23 over both); each is compared from the release of the family that cited it to each of
the derived family's releases, and every change must be in a ledger of the chain below the citing
family (``Family.unreviewed_citations`` of the family or of a family between): a change that is
in no ledger is a failure naming the symbol and release.

Reads only source folders it is given (``sources``: release -> ``sglang/srt`` folder); the
downloading lives in the tests (``tests/sglang_source.py``) and the cache they fill is what
``specstate engines`` reads (``cached_sources``), so nothing here needs the network.
"""

from __future__ import annotations

import ast
import hashlib
import marshal
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping

if TYPE_CHECKING:
    from specstate.model.families import Family

__all__ = ["CITATION", "Citation", "Finding", "RangeReport", "citations_of", "in_force", "fingerprint", "find_file",
           "check_family", "cached_sources", "repo_root"]

CITATION = re.compile(r"([\w/]+\.py)::([A-Za-z_][\w.]*)")


@dataclass(frozen=True, order=True)
class Citation:
    file: str  #: ``managers/schedule_batch.py`` (the path's tail under ``sglang/srt``)
    symbol: str  #: ``Req.update_finish_state``

    def __str__(self) -> str:
        return f"{self.file}::{self.symbol}"


@dataclass(frozen=True)
class Finding:
    citation: Citation
    release: str
    kind: str  #: ``missing`` (no such symbol), ``changed`` (AST differs), ``unreviewed`` (a ledger entry)
    detail: str = ""

    def describe(self) -> str:
        return f"{self.citation} in sglang {self.release}: {self.kind}{': ' + self.detail if self.detail else ''}"


@dataclass
class RangeReport:
    family: str
    releases: tuple[str, ...]
    own: int = 0  #: the family's own citations
    inherited: int = 0  #: the citations in force for the base (``in_force``, the whole chain) it keeps
    checked: tuple[str, ...] = ()  #: releases whose source was available
    missing_sources: tuple[str, ...] = ()
    failures: list[Finding] = field(default_factory=list)
    unreviewed: list[Finding] = field(default_factory=list)  #: ledger entries still to review
    reviewed: int = 0  #: the citations in force for the base that the family re-cites or replaces

    @property
    def ok(self) -> bool:
        return not self.failures


def repo_root() -> Path:
    return Path(__file__).resolve().parents[1]


def _scan(paths: Iterable[Path]) -> frozenset[Citation]:
    out: set[Citation] = set()
    for f in paths:
        if f.is_file():
            out.update(Citation(m.group(1), m.group(2).rstrip(".")) for m in CITATION.finditer(f.read_text()))
    return frozenset(out)


def _files(root: Path, family: str) -> list[Path]:
    """The files whose citations are ``family``'s (``specstate/model/releases.py``): its release
    folder, its page ``docs/model-X.Y.Z.md`` and the paths its package names (``CITED_OUTSIDE``);
    the core release's (the oldest that declares no base: ``releases.core_of``) also every file of the shared core (outside every release's files, and
    outside ``integration/`` and ``oracle/``, whose harnesses cite several releases). A family
    without a folder of its own (a test-only one) has none."""
    from specstate.model.releases import cited_outside, core_of, release_folders

    folders = release_folders(root / "specstate/model")
    if family not in folders:
        return []
    own = {name: sorted(d.rglob("*.py")) + [root / p for p in cited_outside(d)] for name, d in folders.items()}
    page = root / f"docs/model-{family.removeprefix('sglang-')}.md"
    files = own[family] + ([page] if page.is_file() else [])
    if family != core_of(folders):
        return files
    taken = {f for name, fs in own.items() if name != family for f in fs} | {root / "specstate/citations.py"}
    harnesses = {"integration", "oracle"}
    return files + [f for f in sorted((root / "specstate").rglob("*.py"))
                    if f not in taken and f not in files and not harnesses & set(f.relative_to(root).parts)]


def citations_of(family: str, root: Path | None = None) -> frozenset[Citation]:
    """The citations written in ``family``'s own files."""
    return _scan(_files(root or repo_root(), family))


@lru_cache(maxsize=64)
def _by_name(srt: Path) -> Mapping[str, tuple[Path, ...]]:
    out: dict[str, list[Path]] = {}
    for p in sorted(srt.rglob("*.py")):
        out.setdefault(p.name, []).append(p)
    return {k: tuple(v) for k, v in out.items()}


def find_file(srt: Path, rel: str) -> list[Path]:
    """Files under ``sglang/srt`` whose path ends with ``rel``."""
    rel = rel.lstrip("/").removeprefix("sglang/srt/")
    return [p for p in _by_name(srt).get(Path(rel).name, ()) if p.relative_to(srt).as_posix().endswith(rel)]


def _strip(node: ast.AST) -> ast.AST:
    """``node`` without docstrings (a string expression first in a body)."""
    for n in ast.walk(node):
        body = getattr(n, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            n.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
    return node


def _class_shape(node: ast.ClassDef) -> str:
    """A class as its bases, decorators, own statements and method signatures (a method's body
    is its own citation)."""
    parts = [ast.dump(b) for b in node.bases + node.decorator_list]
    for sub in node.body:
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
            parts.append(f"def {sub.name}{ast.dump(sub.args)}")
        else:
            parts.append(ast.dump(sub))
    return "\n".join(parts)


MAX_SOURCE_BYTES = 4 << 20  #: one cached source file (sglang's largest: about 300 KB)


@lru_cache(maxsize=4096)
def _index(path: Path) -> Mapping[str, str]:
    """The symbols of one cached source file; a file that is not a readable Python module of
    sane size and depth (a hostile cache: a folder or FIFO named ``x.py``, bad UTF-8, 10,000
    nested brackets) is one ``FileFormatError`` line naming it (the one reader: ``schema/_files.py``).
    Kept on disk beside the sources (:func:`_stored_index`), signed, so that each process does not parse
    and dump sglang's modules again."""
    from specstate.errors import FileFormatError
    from specstate.schema._files import read_text

    text = read_text(path, what="cached sglang source file", max_bytes=MAX_SOURCE_BYTES)
    entry = _entry(text)
    stored = _stored_index(entry) if entry is not None else None
    if stored is not None:
        return stored
    try:
        out = _symbols(text)
    except (SyntaxError, ValueError) as e:
        raise FileFormatError(f"{path}: expected a Python module of sglang's source but it does not parse: "
                              f"{' '.join(str(e).split())[:160]}") from None
    except (RecursionError, MemoryError):
        raise FileFormatError(f"{path}: expected a Python module of sglang's source but it nests too deeply "
                              f"to read") from None
    if entry is not None:
        from specstate._bytecode import write_signed

        write_signed(*entry, marshal.dumps(dict(out)))
    return out


#: the index store's folder under the upstream cache (``upstream.cache_dir``), one entry per source
#: text: ``<sha256 of the text>.idx``
INDEX_STORE = "citations.index"


@lru_cache(maxsize=1)
def _index_version() -> str:
    """What an index entry depends on besides the source text: this module's own code (its
    ``_symbols``, ``_strip`` and ``_class_shape`` make the fingerprints), by its sha256."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def _entry(text: str) -> tuple[Path, bytes, str, str] | None:
    """Where the index of ``text`` is kept and what signs it, as ``_bytecode.read_signed`` /
    ``write_signed`` take them (path, this user's key, this module's version, the text's sha256);
    ``None`` without a key (nothing is kept)."""
    from specstate._bytecode import key
    from specstate.upstream import cache_dir

    secret = key()
    if secret is None:
        return None
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return cache_dir() / INDEX_STORE / f"{digest}.idx", secret, "citations/" + _index_version(), digest


def _stored_index(entry: tuple[Path, bytes, str, str]) -> Mapping[str, str] | None:
    """The index at ``entry`` if this user's key signed it for this text, this module and this
    Python; else ``None``: a planted, stale or torn entry is derived again from the source, never trusted."""
    from specstate._bytecode import read_signed

    payload = read_signed(*entry)
    if payload is None:
        return None
    try:
        got = marshal.loads(payload)
    except (ValueError, EOFError, TypeError):
        return None
    ok = isinstance(got, dict) and all(type(k) is str and type(v) is str for k, v in got.items())
    return got if ok else None


def _symbols(text: str) -> Mapping[str, str]:
    tree = _strip(ast.parse(text))
    out: dict[str, str] = {}
    for node in tree.body:  # type: ignore[attr-defined]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = ast.dump(node)
        elif isinstance(node, ast.ClassDef):
            out[node.name] = _class_shape(node)
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    out[f"{node.name}.{sub.name}"] = ast.dump(sub)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    out[t.id] = ast.dump(node)
    return out


def fingerprint(srt: Path, citation: Citation) -> str | None:
    """The cited symbol's AST (docstrings stripped) in the source ``srt``, or ``None`` when no
    file of that name defines it (several candidate files: their definitions joined)."""
    found = [_index(p).get(citation.symbol) for p in find_file(srt, citation.file)]
    hits = [f for f in found if f is not None]
    return "\n".join(hits) if hits else None


def _compare(cites: Iterable[Citation], ref: Path, ref_release: str, sources: Mapping[str, Path],
             releases: Iterable[str]) -> list[Finding]:
    out = []
    for c in sorted(cites):
        want = fingerprint(ref, c)
        if want is None:
            out.append(Finding(c, ref_release, "missing", "cited, but not defined in the release cited"))
            continue
        for r in releases:
            if r == ref_release or r not in sources:
                continue
            got = fingerprint(sources[r], c)
            if got != want:
                out.append(Finding(c, r, "missing" if got is None else "changed", f"differs from sglang {ref_release}"))
    return out


def _key(c: Citation) -> tuple[str, str]:
    return (Path(c.file).name, c.symbol)


def check_family(family: str, sources: Mapping[str, Path], root: Path | None = None) -> RangeReport:
    """The release-range check of ``family`` over the releases present in ``sources``."""
    from specstate.model.families import get_family

    fam = get_family(family)
    rep = RangeReport(family, fam.releases)
    own = citations_of(family, root)
    rep.own = len(own)
    rep.checked = tuple(r for r in fam.releases if r in sources)
    rep.missing_sources = tuple(r for r in dict.fromkeys((*fam.releases, fam.source_release)) if r not in sources)
    if fam.source_release in sources:
        rep.failures += _compare(own, sources[fam.source_release], fam.source_release, sources, fam.releases)
    if fam.base is not None:
        _inherited(fam, own, sources, root, rep)
    return rep


def _chain(family: str) -> list["Family"]:
    """``family``, its base, its base's base, ... to the root (a family that declares none)."""
    from specstate.errors import InternalError
    from specstate.model.families import get_family

    out: list[Family] = []
    name: str | None = family
    while name is not None:
        fam = get_family(name)
        if fam.name in {f.name for f in out}:
            raise InternalError(f"the base chain of {family} runs in a circle: "
                                f"{' -> '.join(f.name for f in out)} -> {fam.name}")
        out.append(fam)
        name = fam.base
    return out


def in_force(family: str, root: Path | None = None) -> dict[Citation, "Family"]:
    """The citations in force for ``family``, each with the family that cited it (whose
    ``source_release`` it was read against): its own, and of its base's in force those it neither
    re-cites nor overrides (``Family.overridden_citations``), down the whole base chain. A
    re-citation or an override names a citation by (file name, symbol)."""
    out: dict[Citation, Family] = {}
    for fam in reversed(_chain(family)):  # the root first; each family over what it inherits
        own = citations_of(fam.name, root)
        replaced = {_key(c) for c in own} | {(Path(f).name, s) for f, s in fam.overridden_citations}
        out = {c: by for c, by in out.items() if _key(c) not in replaced}
        out.update(dict.fromkeys(own, fam))
    return out


def _inherited(fam: "Family", own: frozenset[Citation], sources: Mapping[str, Path], root: Path | None,
               rep: RangeReport) -> None:
    """The citations in force for the base that the family keeps (``in_force``: the whole chain):
    each change since the release of the family that cited it is in a ledger of the chain below
    that family (``unreviewed_citations`` of this family or of one between) or a failure."""
    chain = _chain(fam.name)
    base = in_force(chain[1].name, root)
    mine = {_key(c) for c in own}
    gone = {(Path(f).name, s) for f, s in fam.overridden_citations}
    kept = {c: by for c, by in base.items() if _key(c) not in mine | gone}
    rep.reviewed = len(base) - len(kept)
    rep.inherited = len(kept)
    if fam.source_release not in sources:
        return
    by_origin: dict[str, list[Citation]] = {}
    for c, origin in kept.items():
        by_origin.setdefault(origin.name, []).append(c)
    for origin_name, cites in sorted(by_origin.items()):
        origin = next(f for f in chain if f.name == origin_name)
        ref = origin.source_release
        if ref not in sources:
            rep.missing_sources += (ref,) if ref not in rep.missing_sources else ()
            continue
        below = chain[:chain.index(origin)]  # this family and those between it and the citing one
        ledger = {(Path(f).name, s) for between in below for f, s in between.unreviewed_citations}
        for f in _compare(cites, sources[ref], ref, sources, fam.releases):
            if _key(f.citation) in ledger and f.release != ref:
                rep.unreviewed.append(Finding(f.citation, f.release, "unreviewed", f.detail))
            else:
                rep.failures.append(Finding(f.citation, f.release, f.kind,
                                            f"{f.detail} (not in the family's ledger, nor in one between it and {origin.name}, which cites it)"))


def cached_sources(cache: Path | None = None) -> dict[str, Path]:
    """Release -> ``sglang/srt`` folder of every release unpacked in the cache the citation tests
    fill (``upstream.cache_dir``: ``$SPECSTATE_SGLANG_CACHE``, default ``~/.cache/specstate``). Only
    read (its files by the one safe reader, ``_index``), never run."""
    from specstate.upstream import cache_dir

    cache = cache or cache_dir()
    out = {}
    for d in sorted(cache.glob("sglang-*")) if cache.is_dir() else ():
        srt = d / "sglang" / "srt"
        if srt.is_dir():
            out[d.name.removeprefix("sglang-")] = srt
    return out


# -- the vLLM family (``specstate/model/vllm_0_34_0/``): its citations against vLLM's source ----------


def vllm_files(root: Path | None = None, family: str | None = None) -> list[Path]:
    """The files whose citations are the vLLM family's (``family``: that release's only): each release
    folder of an engine with a model of its own, its folder of the same name in ``integration/`` (its
    invariants, check and oracle) and its ``CITED_OUTSIDE``."""
    from specstate.model.releases import cited_outside, is_sglang_family, release_folders

    root = root or repo_root()
    out: list[Path] = []
    for name, d in release_folders(root / "specstate/model").items():
        if not is_sglang_family(name) and family in (None, name):
            above = root / "specstate" / "integration" / d.name
            out += sorted(d.rglob("*.py")) + sorted(above.rglob("*.py")) + [root / p for p in cited_outside(d)]
    return out


def _vllm_symbols(path: Path) -> set[str]:
    """``Name`` and ``Class.member`` defined in a vLLM source file (functions, classes, assignments,
    annotated fields, properties)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()

    def names(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(prefix + node.name)
                if isinstance(node, ast.ClassDef):
                    names(node.body, prefix + node.name + ".")
                    for sub in ast.walk(node):  # instance attributes: ``self.x = ...`` in its methods
                        targets = sub.targets if isinstance(sub, ast.Assign) else \
                            [sub.target] if isinstance(sub, (ast.AnnAssign, ast.AugAssign)) else []
                        out.update(prefix + node.name + "." + t.attr for t in targets if isinstance(t, ast.Attribute)
                                   and isinstance(t.value, ast.Name) and t.value.id == "self")
            elif isinstance(node, ast.Assign):
                out.update(prefix + t.id for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                out.add(prefix + node.target.id)

    names(tree.body, "")
    return out


def check_vllm_citations(source: Path, root: Path | None = None, family: str | None = None) -> tuple[int, list[str]]:
    """Every citation in the vLLM family's files (``family``: that release's), looked up under ``source``
    (the unpacked wheel's ``vllm/`` folder): ``(number of citations, failures)``. A file is found by its
    path's tail (``v1/core/sched/scheduler.py``); a symbol ``A.b`` must be defined in class ``A``."""
    root = root or repo_root()
    cites = sorted(c for c in _scan(vllm_files(root, family))  # specstate's own modules cited beside vLLM's
                   if not ((root / c.file).is_file() or (root / "specstate" / c.file).is_file()))
    failures: list[str] = []
    cache: dict[Path, set[str]] = {}
    for c in cites:
        rel = c.file.removeprefix("vllm/")
        hits = [p for p in _by_name(source).get(Path(rel).name, ()) if p.as_posix().endswith("/" + rel)]
        if not hits:
            failures.append(f"{c.file}::{c.symbol}: no such file in vLLM")
            continue
        found = False
        for h in hits:
            if h not in cache:
                cache[h] = _vllm_symbols(h)
            if c.symbol in cache[h]:
                found = True
        if not found:
            failures.append(f"{c.file}::{c.symbol}: no such symbol")
    return len(cites), failures
