"""``benchmarks.sections.put_section``: a benchmark's section written into docs/performance.md
replaces its earlier copy between its own markers (``<!-- name -->`` ... ``<!-- /name -->``),
whatever section it is, instead of being appended again."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.sections import put_section


def _section(name: str, body: str) -> str:
    return f"<!-- {name} -->\n## {name}\n\n{body}\n<!-- /{name} -->\n"


def test_a_section_written_again_replaces_the_one_before(tmp_path: Path) -> None:
    page = tmp_path / "performance.md"
    page.write_text("# Performance\n\n## Other\n\ntext\n")
    put_section(page, _section("detection", "first"))
    put_section(page, _section("users", "u"))
    put_section(page, _section("detection", "second"))
    text = page.read_text()
    assert text.count("<!-- detection -->") == 1 and text.count("<!-- /detection -->") == 1
    assert "second" in text and "first" not in text
    assert text.index("## detection") < text.index("## users"), "the section keeps its place"
    assert text.startswith("# Performance\n\n## Other\n\ntext\n\n<!-- detection -->")


def test_copies_appended_by_the_old_writer_become_one(tmp_path: Path) -> None:
    page = tmp_path / "performance.md"
    page.write_text("# P\n\n" + _section("detection", "a") + "\n" + _section("detection", "b") + "\n## After\n\nx\n")
    put_section(page, _section("detection", "c"))
    text = page.read_text()
    assert text.count("<!-- detection -->") == 1 and "c\n" in text and "\na\n" not in text and "\nb\n" not in text
    assert text.endswith("## After\n\nx\n")


def test_a_section_without_its_marker_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="marker"):
        put_section(tmp_path / "p.md", "## no marker\n")


def test_a_full_run_puts_every_users_section_back_from_its_saved_figures(tmp_path):
    import json

    from benchmarks import __main__ as bench
    from benchmarks import coverage, detection, explore_reduction, fast_tier, users

    page = tmp_path / "performance.md"
    page.write_text("# Performance\n\nthe rewritten page\n")
    saved = {}
    for name, suffix in bench.USER_SECTIONS:
        src = (bench.ROOT / "docs" / "performance.md").with_suffix(suffix)
        saved[name] = json.loads(src.read_text())
        page.with_suffix(suffix).write_text(src.read_text())
    bench._keep_users_section(page)
    text = page.read_text()
    for mod, name in ((users, "users"), (detection, "detection"), (explore_reduction, "explore_reduction"),
                      (coverage, "coverage"), (fast_tier, "fast_tier")):
        assert mod.render_section(saved[name]).strip() in text


def test_a_benchmark_checks_its_command_line_before_measuring(capsys) -> None:  # noqa: ANN001
    """``--help`` and a mistyped flag end at once (a measuring run takes minutes to an hour)."""
    from benchmarks import detection, digest, fast_tier, users
    from benchmarks.sections import usage

    flags = {"--quick": False, "--out": True}
    assert usage(["--quick", "--out", "p.md"], "doc", flags) is None
    assert usage(["--help"], "the doc", flags) == 0 and "the doc" in capsys.readouterr().out
    assert usage(["--quik"], "doc", flags) == 2 and "unknown argument '--quik'" in capsys.readouterr().err
    assert usage(["--out"], "doc", flags) == 2 and "--out expects a value" in capsys.readouterr().err
    for module in (detection, digest, fast_tier, users):  # each returns before measuring anything
        assert module.main(["--no-such-flag"]) == 2
        assert module.main(["--help"]) == 0
