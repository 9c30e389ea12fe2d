"""The teachers' page shows how long each chapter takes to run, read from the measurement.

A local Sphinx extension, wired in by ``_config.yml``. ``scripts/time_chapters.py``
measures every notebook and writes ``specdec_lib/results/chapter_times.json``; this
extension reads that file when the site is built, so no time on the page is typed by
hand (the job ``glue`` does for numbers computed inside a notebook). It adds

* a directive, ``chapter-times``, that renders one row per notebook of the table of
  contents: its title (a link), wall seconds and the kernel's peak memory, and a last
  row with the total;
* a role, ``chapter-times``, for a number in the prose: ``slowest_seconds``,
  ``total_minutes``, ``peak_mb``, ``machine`` or ``measured``.

A notebook in the table of contents with no measurement stops the build (a warning,
and the book is built with warnings as errors): the page cannot go stale silently
when a chapter is added. ``tests/test_book.py`` checks the same thing without a build.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective, SphinxRole

sys.path.insert(0, str(Path(__file__).resolve().parent))
import book_toc  # noqa: E402  (scripts/, beside this file)

RESULTS = Path("specdec_lib") / "results" / "chapter_times.json"
logger = logging.getLogger(__name__)


def toc_notebooks(srcdir: Path) -> list[str]:
    """Docnames of the notebooks in ``_toc.yml``, in reading order."""
    return [
        p.relative_to(srcdir).with_suffix("").as_posix() for p in book_toc.toc_notebooks(srcdir)
    ]


def read_times(env: Any) -> dict:
    path = Path(env.srcdir) / RESULTS
    env.note_dependency(str(path))
    return json.loads(path.read_text(encoding="utf-8"))


def summary(data: dict) -> dict[str, str]:
    """The values the role can insert, formatted for prose."""
    rows = data["notebooks"].values()
    m = data["machine"]
    threads = "one thread" if m.get("omp_num_threads") == "1" else f"{m['omp_num_threads']} threads"
    return {
        "slowest_seconds": f"{max(r['seconds'] for r in rows):.0f}",
        "total_minutes": f"{sum(r['seconds'] for r in rows) / 60:.0f}",
        "peak_mb": f"{max(r['peak_rss_mb'] for r in rows):,.0f}",
        "machine": f"{m['cpu']} ({m['cores']} cores), Python {m['python']}, "
        f"PyTorch {m['torch']}, {threads}",
        "measured": max(r["measured"] for r in rows),
    }


class ChapterTimesTable(SphinxDirective):
    """``chapter-times``: a table of the measured time and memory of every notebook."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        data = read_times(self.env)
        measured = data["notebooks"]
        table = nodes.table(classes=["chapter-times"])
        group = nodes.tgroup(cols=3)
        table += group
        for width in (60, 20, 20):
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        body = nodes.tbody()
        group += head
        group += body
        head += self._row(
            [nodes.Text("notebook"), nodes.Text("wall time (s)"), nodes.Text("peak memory (MB)")]
        )
        total = 0.0
        for docname in toc_notebooks(Path(self.env.srcdir)):
            entry = measured.get(f"{Path(docname).name}.ipynb")
            if entry is None:
                logger.warning(
                    f"{docname}.ipynb has no time in {RESULTS}: run "
                    "`OMP_NUM_THREADS=1 python scripts/time_chapters.py`",
                    location=self.get_location(),
                )
                continue
            total += entry["seconds"]
            link = addnodes.pending_xref(
                "",
                nodes.inline("", docname),
                refdomain="std",
                reftype="doc",
                reftarget=f"/{docname}",
                refexplicit=False,
                refwarn=True,
                refdoc=self.env.docname,
            )
            peak = entry["peak_rss_mb"]
            body += self._row(
                [
                    link,
                    nodes.Text(f"{entry['seconds']:.1f}"),
                    nodes.Text("n/a" if peak is None else f"{peak:,.0f}"),
                ]
            )
        body += self._row(
            [
                nodes.Text("all notebooks, one after another"),
                nodes.Text(f"{total:.0f}"),
                nodes.Text(""),
            ]
        )
        return [table]

    @staticmethod
    def _row(cells: list[nodes.Node]) -> nodes.row:
        row = nodes.row()
        for cell in cells:
            entry = nodes.entry()
            entry += nodes.paragraph("", "", cell)
            row += entry
        return row


class ChapterTimesValue(SphinxRole):
    """``{chapter-times}`key```: one value from the measurement, as text."""

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        values = summary(read_times(self.env))
        if self.text not in values:
            msg = self.inliner.reporter.error(
                f"chapter-times: unknown key {self.text!r}; one of {sorted(values)}",
                line=self.lineno,
            )
            return [], [msg]
        return [nodes.Text(values[self.text])], []


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("chapter-times", ChapterTimesTable)
    app.add_role("chapter-times", ChapterTimesValue())
    return {"parallel_read_safe": True, "parallel_write_safe": True}
