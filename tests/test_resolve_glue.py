"""Glued numbers written into the prose read exactly as the website shows them.

``scripts/resolve_glue.py`` serves every route where a chapter is read without
the website's builder: student notebooks, Binder (``binder/postBuild``), the download
button and the Colab button (``scripts/book_resolved_notebooks.py``). Here: its
formatting against myst-nb's own, its reading of Markdown against myst-parser's, an
unknown name, every chapter, the Binder step and the Sphinx extension.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
sys.path.insert(0, str(ROOT / "scripts"))

import book_resolved_notebooks as B  # noqa: E402

import resolve_glue as R  # noqa: E402
from resolve_glue import count_glue_roles, format_glue_text, main, resolve_glue  # noqa: E402

PREFIX = "application/papermill.record/"
SPECS = ["", "s", ".2f", ".0f", ".0%", ".1%", ",", ",.0f", ".1e", ".0e", "+.1f", "+.2f", "d", ",d"]
VALUES = ["0.6123", "1234567", "-0.05", "3", "0.0", "1.5e-05", "'copy'", "'4,096'", "True"]


def _myst_format():
    return pytest.importorskip("myst_nb.core.variables").format_plain_text


def _outcome(format_, text: str, spec: str) -> str:
    try:
        return format_(text, spec)
    except (TypeError, ValueError) as exc:
        return f"raises {type(exc).__name__}"


@pytest.mark.parametrize("spec", SPECS)
def test_the_formatting_is_myst_nb_s_with_or_without_myst_nb(spec):
    myst = _myst_format()
    for text in VALUES:
        expected = _outcome(myst, text, spec)
        assert _outcome(R._format_plain_text, text, spec) == expected, (text, spec)
        assert _outcome(format_glue_text, text, spec) == expected, (text, spec)
    assert format_glue_text("0.6123", ".2f") == "0.61"
    assert format_glue_text("0.6123", ".0%") == "61%"
    assert format_glue_text("1234567", ",") == "1,234,567"
    assert format_glue_text("-0.05", "+.1f") == "-0.1"
    assert format_glue_text("'copy'") == "copy"  # a glued string loses its quotes


def test_every_stored_value_formats_as_on_the_website_with_the_spec_its_role_uses():
    myst = _myst_format()
    pairs = 0
    for path in CHAPTERS:
        nb = nbformat.read(path, as_version=4)
        glued = R._glued(nb, path.name)
        prose = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        for content in re.findall(r"\{glue:text\}`([^`]+)`", prose):
            key, spec = content.rsplit(":", 1) if ":" in content else (content, "s")
            text = glued[key]["text/plain"]
            assert R._format_plain_text(text, spec) == myst(text, spec), (path.name, content)
            pairs += 1
    assert pairs > 500


def _glue_output(name: str, text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_output(
        "display_data",
        data={PREFIX + "text/plain": text},
        metadata={"scrapbook": {"name": name, "mime_prefix": PREFIX}},
    )


def _notebook(markdown: str, **glued: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    code = nbformat.v4.new_code_cell("glue(...)")
    code.outputs = [_glue_output(name, text) for name, text in glued.items()]
    nb.cells = [code, nbformat.v4.new_markdown_cell(markdown)]
    return nb


MARKDOWN = """\
At $k =$ {glue:text}`k`, {glue:text}`tpp:.2f` tokens per pass ({glue:text}`acc:.0%`),
on {glue:text}`workload` with {glue}`k` and {glue:text}`n:,`.
Not roles: `{glue:text}`tpp`` in code, \\{glue:text}`tpp` escaped, $a {glue:text}`tpp` b$.

```python
glue("tpp", {glue:text}`tpp`)
```

:::{admonition} At {glue:text}`tpp:.1f` tokens
:class: dropdown
Inside a directive: {glue:text}`tpp:.3f`.
:::"""

RESOLVED = """\
At $k =$ 4, 2.46 tokens per pass (61%),
on a\\_b with 4 and 12,345.
Not roles: `{glue:text}`tpp`` in code, \\{glue:text}`tpp` escaped, $a {glue:text}`tpp` b$.

```python
glue("tpp", {glue:text}`tpp`)
```

:::{admonition} At 2.5 tokens
:class: dropdown
Inside a directive: 2.456.
:::"""


def test_roles_are_replaced_where_myst_reads_roles_and_nowhere_else():
    nb = _notebook(MARKDOWN, k="4", tpp="2.4562", acc="0.6123", workload="'a_b'", n="12345")
    resolved = resolve_glue(nb, "example")
    assert resolved.cells[1].source == RESOLVED
    assert nb.cells[1].source == MARKDOWN  # the input is not modified
    assert resolved.cells[0] == nb.cells[0]
    assert count_glue_roles(nb) == 8 and count_glue_roles(resolved) == 0


def test_a_name_no_cell_glues_raises_and_nothing_is_half_resolved():
    nb = _notebook("{glue:text}`tpp:.2f` and {glue:text}`tps:.2f`", tpp="2.5")
    with pytest.raises(ValueError, match=r"example, cell 1: .*'tps', which no code cell"):
        resolve_glue(nb, "example")
    with pytest.raises(ValueError, match="glued twice"):
        bad = _notebook("x", tpp="2.5")
        bad.cells[0].outputs.append(_glue_output("tpp", "2.6"))
        resolve_glue(bad)
    with pytest.raises(ValueError, match="cannot format"):
        resolve_glue(_notebook("{glue:text}`w:.2f`", w="'copy'"))
    with pytest.raises(ValueError, match="glue directive"):
        resolve_glue(_notebook("```{glue:figure} fig\n```", fig="1"))
    with pytest.raises(ValueError, match="another document"):
        resolve_glue(_notebook("{glue:text}`other::tpp:.2f`", tpp="2.5"))
    with pytest.raises(ValueError, match="nb must be a notebook"):
        resolve_glue({"cells": None})
    with pytest.raises(ValueError, match="spec must be"):
        format_glue_text("1", 2)


def _myst_roles(text: str, md, literal: set[str]) -> int:
    """Glue roles myst-parser finds in ``text``, directive bodies and titles included."""
    found = 0
    for token in md.parse(text):
        if token.type == "inline":
            found += sum(
                c.type == "myst_role" and c.meta["name"].startswith("glue") for c in token.children
            )
        info = token.info.strip() if token.type in ("fence", "colon_fence") else ""
        if info.startswith("{") and info[1:].split("}")[0] not in literal:
            found += _myst_roles(token.content, md, literal) + _myst_roles(
                info.split("}", 1)[1], md, literal
            )
    return found


def test_the_roles_found_are_the_roles_myst_parser_finds_in_every_chapter_cell():
    mdit = pytest.importorskip("myst_parser.parsers.mdit")
    from markdown_it.renderer import RendererHTML
    from myst_parser.config.main import MdParserConfig

    extensions = {"amsmath", "colon_fence", "deflist", "dollarmath", "substitution"}
    md = mdit.create_md_parser(MdParserConfig(enable_extensions=extensions), RendererHTML)
    total = 0
    for path in [*CHAPTERS, None]:
        nb = nbformat.read(path, as_version=4) if path else _notebook(MARKDOWN)
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                expected = _myst_roles(cell.source, md, R._LITERAL_DIRECTIVES)
                assert count_glue_roles({"cells": [cell]}) == expected, (path, cell.source)
                total += expected
    assert total > 900


def test_every_chapter_resolves_whole_and_only_its_prose_changes():
    for path in CHAPTERS:
        nb = nbformat.read(path, as_version=4)
        resolved = resolve_glue(nb, path.name)
        assert count_glue_roles(resolved) == 0, path.name
        for before, after in zip(nb.cells, resolved.cells, strict=True):
            if before.cell_type != "markdown":
                assert before == after
            elif "{glue" not in before.source:
                assert before.source == after.source


def test_without_myst_nb_the_chapters_resolve_to_the_same_text(monkeypatch):
    with_myst = [resolve_glue(nbformat.read(p, as_version=4)) for p in CHAPTERS[:4]]
    monkeypatch.setattr(R, "_myst_format_plain_text", None)
    without = [resolve_glue(nbformat.read(p, as_version=4)) for p in CHAPTERS[:4]]
    assert with_myst == without


def test_the_command_counts_writes_copies_and_resolves_in_place(tmp_path, capsys):
    nb = _notebook("{glue:text}`tpp:.2f` tokens", tpp="2.4562")
    path = tmp_path / "a.ipynb"
    nbformat.write(nb, path)
    assert main([str(path), "--count"]) == 0
    assert "a.ipynb: 1 raw glue roles" in capsys.readouterr().out
    assert main([str(path), "--out", str(tmp_path / "out")]) == 0
    assert nbformat.read(tmp_path / "out" / "a.ipynb", as_version=4).cells[1].source == (
        "2.46 tokens"
    )
    assert nbformat.read(path, as_version=4) == nb
    assert main([str(path)]) == 0
    assert count_glue_roles(nbformat.read(path, as_version=4)) == 0


def test_binder_post_build_leaves_no_raw_role_in_the_image_s_chapters(tmp_path):
    shutil.copytree(ROOT / "chapters", tmp_path / "chapters")
    shutil.copytree(ROOT / "binder", tmp_path / "binder")
    (tmp_path / "scripts").mkdir()  # the one script postBuild runs, and nothing it imports
    shutil.copy(ROOT / "scripts" / "resolve_glue.py", tmp_path / "scripts")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run(
        ["bash", "binder/postBuild"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().endswith(f"total: 0 raw glue roles in {len(CHAPTERS)} notebooks")
    for path in sorted((tmp_path / "chapters").glob("*.ipynb")):
        assert count_glue_roles(nbformat.read(path, as_version=4)) == 0, path.name
    assert os.access(ROOT / "binder" / "postBuild", os.X_OK)  # repo2docker runs it


def _app(tmp_path: Path, branch: str = "") -> SimpleNamespace:
    config = SimpleNamespace(html_sourcelink_suffix="", resolved_notebooks_colab_branch=branch)
    env = SimpleNamespace(
        found_docs={"chapters/a", "intro"},
        doc2path=lambda doc: str(tmp_path / "src" / (doc + (".ipynb" if "/" in doc else ".md"))),
    )
    return SimpleNamespace(
        config=config,
        env=env,
        outdir=str(tmp_path / "html"),
        builder=SimpleNamespace(format="html"),
    )


def test_the_site_serves_resolved_copies_for_download(tmp_path):
    app = _app(tmp_path)
    nb = _notebook("{glue:text}`tpp:.2f` tokens", tpp="2.4562")
    (tmp_path / "src" / "chapters").mkdir(parents=True)
    nbformat.write(nb, tmp_path / "src" / "chapters" / "a.ipynb")
    copy = B.source_copy(Path(app.outdir), "chapters/a", "")
    assert copy == tmp_path / "html" / "_sources" / "chapters" / "a.ipynb"
    copy.parent.mkdir(parents=True)
    shutil.copy(tmp_path / "src" / "chapters" / "a.ipynb", copy)  # what Sphinx copied
    B.write_resolved_copies(app, None)
    served = nbformat.read(copy, as_version=4)
    assert served.cells[1].source == "2.46 tokens"
    assert served.cells[0].outputs == nb.cells[0].outputs


def test_the_colab_button_opens_the_resolved_copy_when_the_site_s_branch_is_set(tmp_path):
    source = "https://colab.research.google.com/github/org/repo/blob/main/chapters/a.ipynb"

    def page(branch: str) -> str:
        button = {"text": "Colab", "url": source}
        context = {
            "sourcename": "chapters/a.ipynb",
            "header_buttons": [{"label": "launch-buttons", "buttons": [button]}],
        }
        B.point_colab_at_resolved_copy(_app(tmp_path, branch), "chapters/a", "page", context, None)
        return button["url"]

    assert page("") == source
    assert page("gh-pages") == (
        "https://colab.research.google.com/github/org/repo/blob/gh-pages/_sources/chapters/a.ipynb"
    )
    with pytest.raises(ValueError, match="url is not"):
        B.colab_url("https://example.org/a.ipynb", "gh-pages", "chapters/a.ipynb")


def test_the_resolver_needs_nothing_but_the_standard_library():
    """Binder and Colab have no myst-nb: the module imports it only inside a ``try``."""
    modules = set()
    for node in ast.parse(Path(R.__file__).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            modules |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            modules.add(node.module.split(".")[0])
    assert "re" in modules and modules <= set(sys.stdlib_module_names) | {"__future__"}
