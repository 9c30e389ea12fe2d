"""Hide the test suite's markers from the reader: a local Sphinx extension.

Two kinds of line in a notebook's code cells are instructions to tools, not code for a
reader: ``# NBVAL_IGNORE_OUTPUT`` with the one-line reason under it (nbval skips that
cell's output) and ``### BEGIN SOLUTION`` / ``### END SOLUTION`` (the student-notebook
generator cuts what lies between). The notebooks keep them, since the tools need them;
the website shows each code cell without them. ``scripts/check_site.mjs`` fails on a
built page that still shows one.
"""

from __future__ import annotations

from docutils import nodes
from sphinx.application import Sphinx

NBVAL_MARKER = "# NBVAL_IGNORE_OUTPUT"
SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")


def strip_markers(source: str) -> str:
    """``source`` without marker lines (and the reason comment under an nbval marker)."""
    lines = source.split("\n")
    out: list[str] = []
    skip_reason = False
    for line in lines:
        stripped = line.strip()
        if skip_reason:
            skip_reason = False
            if stripped.startswith("#"):
                continue
        if stripped == NBVAL_MARKER:
            skip_reason = True
            continue
        if stripped in SOLUTION_MARKERS:
            continue
        out.append(line)
    return "\n".join(out)


def _hide(app: Sphinx, doctree: nodes.document) -> None:
    for block in doctree.findall(nodes.literal_block):
        parent = block.parent
        if parent is None or parent.get("nb_element") != "cell_code_source":
            continue
        text = block.astext()
        cleaned = strip_markers(text)
        if cleaned != text:
            block.children = [nodes.Text(cleaned)]
            block.rawsource = cleaned


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("doctree-read", _hide)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
