"""Number exercises, theorems and the like per chapter: a local Sphinx extension.

Sphinx numbers enumerable nodes (sphinx-exercise's exercises, sphinx-proof's
theorems, propositions, ...) by section number. This book's table of contents
is not numbered (its chapters are numbered by their file names, 0 to 11 with
7b, then appendix A), so Sphinx would count every exercise of the whole book
in one sequence: chapter 0 would open with "Exercise 2" because the how-to
page shows an example exercise first.

After Sphinx has assigned its numbers, this extension renumbers each page's
nodes of each kind from 1, in page order, prefixed with the chapter's number
taken from the file name: ``Exercise 6.2`` is chapter 6's second exercise,
``Theorem 8.1`` chapter 8's first theorem, ``Exercise 7b.1`` and
``Exercise A.1`` those of chapter 7b and appendix A. A page that is not a
chapter (the how-to page) numbers its own from 1 with no prefix. Titles,
solutions ("Solution to Exercise 6.2") and cross-references all read the
numbers from ``env.toc_fignumbers``, so they agree.
"""

from __future__ import annotations

import re

from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

# chapters/00_a_first_look -> "0", chapters/07b_bugs_... -> "7b", chapters/appendix_a_... -> "A"
CHAPTER = re.compile(r"(?:^|/)(?:(?P<num>\d+)(?P<suffix>[a-z]?)|appendix_(?P<letter>[a-z]))_[^/]*$")


def chapter_number(docname: str) -> str | None:
    """The chapter number a page's file name gives, or None for a page that is not a chapter."""
    match = CHAPTER.search(docname)
    if match is None:
        return None
    if match["letter"]:
        return match["letter"].upper()
    return f"{int(match['num'])}{match['suffix']}"


def renumber(app: Sphinx, env: BuildEnvironment) -> list[str]:
    changed = set()
    for docname, figtypes in env.toc_fignumbers.items():
        prefix = chapter_number(docname)
        for numbers in figtypes.values():
            # Sphinx assigned increasing numbers in page order; keep that order.
            ordered = sorted(numbers, key=lambda node_id: numbers[node_id])
            new = {
                node_id: (prefix, n) if prefix is not None else (n,)
                for n, node_id in enumerate(ordered, start=1)
            }
            if new != numbers:
                numbers.clear()
                numbers.update(new)
                changed.add(docname)
    return sorted(changed)


def setup(app: Sphinx) -> dict[str, object]:
    # After Sphinx's own TocTreeCollector (priority 500) has assigned the global numbers.
    app.connect("env-get-updated", renumber, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
