"""Classes of error that every review of the book found, checked by a program.

``scripts/review_chapter.md`` is the reviewer's checklist; these are the items of it a
program can check, from the stored notebooks alone (nothing is executed, the whole file
runs in seconds):

* visible code uses only names defined in visible cells (review class 10);
* the notebooks' Markdown names only exercises, checkers, chapters and notebooks that
  exist (class 9; ``tests/test_pages.py`` checks the same for the pages about the course);
* a chapter's "What to remember" states no number its body above does not (class 1);
* no legend shows two labels with one swatch (class 8).

Each check has a synthetic notebook with a planted violation that it must catch.

A violation in a chapter as it stands is listed below, in a ``KNOWN_...`` set, with the
chapter, the cell (its index when listed: it may move when cells are added above it; the
match is on the chapter and the name or number) and what is wrong. A new violation fails
the test, and so does a listed one that is gone: take it off the list when the chapter
is fixed, so the list only shrinks.
"""

from __future__ import annotations

import builtins
import functools
import re
import symtable
import sys
from collections.abc import Iterable
from pathlib import Path

import nbformat
import pytest
import test_pages
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from specdec_lib.grading import CHECKS

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "chapters"
NOTEBOOKS = sorted(CHAPTERS.glob("*.ipynb"))

sys.path.insert(0, str(ROOT / "scripts"))
from resolve_glue import format_glue_text  # noqa: E402

# --- known violations: (chapter, cell, what). Empty these as the chapters are fixed. --------

#: Visible cells that use a name only a hidden cell defines: (notebook, cell, name).
KNOWN_HIDDEN_NAMES: set[tuple[str, int, str]] = set()

#: Names in a notebook's Markdown that do not exist: (notebook, cell, name).
KNOWN_UNKNOWN_NAMES: set[tuple[str, int, str]] = set()

#: Numbers a "What to remember" states and the body above it does not: (notebook, cell,
#: glue name or literal).
KNOWN_SUMMARY_NUMBERS: set[tuple[str, int, str]] = {}

#: Legends in which two labels share one swatch: (notebook, cell, "label | label").
KNOWN_LEGEND_CLASHES: set[tuple[str, int, str]] = set()


def _compare(found: Iterable[tuple[int, str]], known: set, notebook: str, listing: str) -> None:
    """Fail on a violation not in ``known``, or on a listed one no longer found."""
    found = list(found)
    names = {what for _, what in found}
    listed = {what for nb, _, what in known if nb == notebook}
    new = [(cell, what) for cell, what in found if what not in listed]
    gone = sorted(listed - names)
    assert not new, f"{notebook}: new violations (cell, what): {new}"
    assert not gone, (
        f"{notebook}: {gone} no longer found: the chapter was fixed, so take them off "
        f"{listing} in tests/test_book_claims.py"
    )


def test_a_new_violation_fails_and_so_does_a_listed_one_that_is_gone():
    known = {("a.ipynb", 3, "x"), ("b.ipynb", 1, "y")}
    _compare([(5, "x")], known, "a.ipynb", "KNOWN")  # listed; its cell moved: passes
    with pytest.raises(AssertionError, match="new violations"):
        _compare([(3, "x"), (4, "z")], known, "a.ipynb", "KNOWN")
    with pytest.raises(AssertionError, match="no longer found"):
        _compare([], known, "a.ipynb", "KNOWN")


@functools.cache
def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def _ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def _synthetic(*cells: nbformat.NotebookNode) -> nbformat.NotebookNode:
    return new_notebook(cells=list(cells))


# --- 1. visible code uses only names defined in visible cells ------------------------------

#: Tags that keep a code cell's input off the website: Live Code (Thebe) runs only the
#: inputs a page shows, so what such a cell defines does not exist for a reader there.
#: ``hide-input`` folds the input but shows it and Live Code runs it: it is visible.
HIDING_TAGS = {"remove-cell", "remove-input"}
#: Names IPython gives every cell besides Python's builtins.
IPYTHON_NAMES = {"display", "get_ipython", "In", "Out", "exit", "quit", "_", "__", "___"}
KNOWN_GLOBALS = set(dir(builtins)) | IPYTHON_NAMES


def is_visible(cell: nbformat.NotebookNode) -> bool:
    """Whether the website shows this code cell's input (and Live Code runs it)."""
    return cell.cell_type == "code" and not HIDING_TAGS & set(cell.metadata.get("tags", []))


def defined_and_used(source: str) -> tuple[set[str], set[str]]:
    """The global names a cell binds and the global names it reads.

    Bound: assigned, imported, a ``def`` or ``class``, or assigned under ``global``
    anywhere in the cell. Read: loaded at the top level or, from inside a function, class,
    lambda or comprehension, a name that is none of theirs (their parameters, loop
    variables and locals are not globals; attributes are not names). IPython's ``%`` and
    ``!`` lines are skipped. A name the cell both reads and binds counts as bound, so a
    name read above its own assignment in one cell is not caught (nbval would be).
    """
    code = "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()
    )
    top = symtable.symtable(code, "<cell>", "exec")
    defined, used = set(), set()
    for symbol in top.get_symbols():
        if symbol.is_assigned() or symbol.is_imported() or symbol.is_namespace():
            defined.add(symbol.get_name())
        if symbol.is_referenced():
            used.add(symbol.get_name())
    scopes = list(top.get_children())
    while scopes:
        scope = scopes.pop()
        scopes += scope.get_children()
        for symbol in scope.get_symbols():
            if symbol.is_declared_global() and symbol.is_assigned():
                defined.add(symbol.get_name())
            elif symbol.is_global() and symbol.is_referenced():
                used.add(symbol.get_name())
    return defined, used


def names_from_hidden_cells(nb: nbformat.NotebookNode) -> list[tuple[int, str]]:
    """(cell index, name) for every name a visible code cell reads that no visible cell
    before it (or itself) defines: defined only in a hidden cell, or nowhere."""
    visible: set[str] = set()
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        defined, used = defined_and_used(cell.source)
        if not is_visible(cell):
            continue
        found += [(index, name) for name in sorted(used - defined - visible - KNOWN_GLOBALS)]
        visible |= defined
    return found


def test_a_visible_cell_that_reads_a_hidden_cells_name_is_caught():
    hidden = new_code_cell(
        "import numpy as np\nhelper = 3\ndef shown(x):\n    return x",
        metadata={"tags": ["remove-cell"]},
    )
    no_input = new_code_cell("table = {}", metadata={"tags": ["remove-input"]})
    folded = new_code_cell("folded = 1", metadata={"tags": ["hide-input"]})
    reader = new_code_cell(
        "%matplotlib inline\n"
        "import math\n"
        "values = [v * folded for v in range(4)]  # comprehension variable, folded cell\n"
        "def f(a, *, b=len(values)):\n"
        "    local = a + b\n"
        "    return local + helper  # a hidden cell's name, read in a function\n"
        "print(math.pi, table.keys(), np.zeros(1).shape, display)\n"
        "lambda q: q + undefined_anywhere\n"
    )
    nb = _synthetic(new_markdown_cell("# T"), hidden, no_input, folded, reader)
    assert names_from_hidden_cells(nb) == [
        (4, "helper"),
        (4, "np"),
        (4, "table"),
        (4, "undefined_anywhere"),
    ]
    # The same cells all visible: nothing to report.
    for cell in (hidden, no_input):
        cell.metadata["tags"] = []
    assert names_from_hidden_cells(nb) == [(4, "undefined_anywhere")]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_visible_code_uses_only_names_defined_in_visible_cells(path):
    _compare(
        names_from_hidden_cells(_read(path)), KNOWN_HIDDEN_NAMES, path.name, "KNOWN_HIDDEN_NAMES"
    )


# --- 2. the notebooks' Markdown names only things that exist -------------------------------

# A directive's opening fence and its options (``:label: x``): unlike test_pages' pattern,
# an option line is ``:word:``, so a closing ``:::`` and the next directive's fence that
# follow without a blank line are not read as options of this one.
_DIRECTIVE = re.compile(
    r"^(?::{3,}|`{3,})\{(?P<name>[\w:-]+)\}[^\n]*\n(?P<options>(?::\w[\w-]*:[^\n]*\n)*)", re.M
)
_GLUE = re.compile(r"\{glue(?::\w*)?\}`[^`]*`")


def _markdown(nb: nbformat.NotebookNode) -> str:
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


@functools.cache
def exercises() -> dict[str, tuple[list[str], dict[str, int]]]:
    """Each chapter's exercise labels in order, and how many of each directive it has."""
    found = {}
    for number, chapter in test_pages.chapters().items():
        labels: list[str] = []
        counts: dict[str, int] = {}
        for match in _DIRECTIVE.finditer(_markdown(_read(CHAPTERS / f"{chapter.stem}.ipynb"))):
            kind = match["name"].removeprefix("prf:").removesuffix("-start")
            counts[kind] = counts.get(kind, 0) + 1
            if kind == "exercise":
                label = re.search(r"^:label:\s*(\S+)", match["options"], re.M)
                labels.append(label.group(1) if label else "")
        found[number] = (labels, counts)
    return found


def unknown_names(nb: nbformat.NotebookNode) -> list[tuple[int, str]]:
    """(cell index, name) for every exercise label, checker, chapter, numbered exercise
    or theorem, notebook or page a Markdown cell names that does not exist. Glued values
    are not names, nor is a keyword argument (``check_greedy=True``)."""
    facts = exercises()
    labels = {label for chapter_labels, _ in facts.values() for label in chapter_labels}
    labels |= {
        m
        for p in test_pages.PAGES
        for m in re.findall(r"^:label:\s*(\S+)", test_pages.page(p), re.M)
    }
    stems = {p.stem for p in CHAPTERS.glob("*.ipynb")}
    pages = stems | {p.stem for p in CHAPTERS.glob("*.md")}
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        text = _GLUE.sub(" ", cell.source)
        wrong = [m.group(0) for m in test_pages._LABEL.finditer(text) if m.group(0) not in labels]
        wrong += [
            m.group(0)
            for m in re.finditer(r"\bcheck_[a-z0-9_]+\b(?!\s*=)", text)
            if m.group(0) not in CHECKS
        ]
        wrong += [f"chapter {n}" for n in test_pages.chapters_named(text) if n not in facts]
        for m in test_pages._NUMBERED.finditer(text):
            have = facts.get(m["chapter"], ([], {}))[1].get(m["kind"].lower(), 0)
            if have < int(m["n"]):
                wrong.append(m.group(0))
        for m in test_pages._ORDINAL.finditer(text):
            have = facts.get(m["chapter"], ([], {}))[1].get(m["kind"].lower(), 0)
            if have < test_pages._ORDINALS.index(m["ordinal"].lower()) + 1:
                wrong.append(m.group(0))
        wrong += [m["stem"] for m in test_pages._NOTEBOOK.finditer(text) if m["stem"] not in stems]
        wrong += [m["target"] for m in test_pages._DOC.finditer(text) if m["target"] not in pages]
        found += [(index, name) for name in wrong]
    return found


def test_the_pages_test_reads_every_page_about_the_course():
    # tests/test_pages.py checks the names on the pages it lists; a page added to
    # chapters/ without being listed there would go unchecked.
    assert set(test_pages.PAGES) == {p.name for p in CHAPTERS.glob("*.md")}


def test_the_exercises_of_every_chapter_are_read():
    facts = exercises()
    assert facts["7"][0] == ["ex-samples-needed", "ex-distribution-test", "ex-where-to-test"]
    assert facts["12"][1]["exercise"] == len(facts["12"][0]) == 4


def test_a_name_that_does_not_exist_is_caught():
    nb = _synthetic(
        new_markdown_cell(
            "Try {ref}`ex-trees-mask` and `check_tree_mask` (chapter 12, Exercise 12.1), "
            "{doc}`03_ngram_drafter`, with `per_prompt(check_greedy=True)` and "
            "{glue:text}`check_tokens` tokens."
        ),
        new_markdown_cell(
            "Then ex-no-such-exercise, `check_no_such_thing`, chapter 14, Exercise 3.9, "
            "chapter 6's fifth exercise, 99_missing.ipynb and {doc}`nowhere`."
        ),
    )
    assert unknown_names(nb) == [
        (1, "ex-no-such-exercise"),
        (1, "check_no_such_thing"),
        (1, "chapter 14"),
        (1, "Exercise 3.9"),
        (1, "chapter 6's fifth exercise"),
        (1, "99_missing"),
        (1, "nowhere"),
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_a_chapter_names_only_exercises_checkers_chapters_and_notebooks_that_exist(path):
    _compare(unknown_names(_read(path)), KNOWN_UNKNOWN_NAMES, path.name, "KNOWN_UNKNOWN_NAMES")


# --- 3. "What to remember" says no number the body does not --------------------------------

_ROLE = re.compile(r"\{(?P<role>glue(?::\w*)?)\}`(?P<content>[^`]+)`")
# A numeral: 1,500 or 1500 or 0.31, then an optional % or × (or "x" for times).
_NUMERAL = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?:\s*(%|×|x\b))?")
# Where a number is an address, not a value: a {doc}/{ref}/... role's target, a link's.
_ADDRESSES = [
    re.compile(r"\{(?!glue)[\w:-]+\}`[^`]*`"),
    re.compile(r"\]\([^)]*\)|https?://\S+"),
]
# Where a number is not a claim about a measurement: a chapter, exercise or file named,
# code, and a parameter set to whole numbers ($k = 4$, $k$ = 3, 7, 10).
_NOT_CLAIMS = [
    *_ADDRESSES,
    test_pages._CHAPTER_LIST,
    test_pages._APPENDIX,
    test_pages._NUMBERED,
    test_pages._NOTEBOOK,
    re.compile(r"`[^`]*`"),
    re.compile(r"\b[A-Za-z]\$?\s*=\s*\$?\d+(?![.\d])(?:\s*(?:,\s*and|,|and)\s*\d+(?![.\d]))*"),
]


def _glue_key(role: str, content: str) -> tuple[str, str]:
    if role == "glue:text" and ":" in content:
        key, spec = content.rsplit(":", 1)
        return key, spec
    return content, ""


def _stored_glue(nb: nbformat.NotebookNode) -> dict[str, str]:
    glued = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            scrapbook = output.get("metadata", {}).get("scrapbook", {})
            key = scrapbook.get("mime_prefix", "") + "text/plain"
            if scrapbook and key in output.get("data", {}):
                glued[scrapbook["name"]] = output["data"][key]
    return glued


def _shown(role: str, content: str, glued: dict[str, str]) -> str:
    """A glue role as the website shows it ("" if it cannot be resolved here)."""
    key, spec = _glue_key(role, content)
    try:
        return format_glue_text(glued[key], spec)
    except (KeyError, TypeError, ValueError):
        return ""


def numerals(text: str, *, every: bool = False) -> list[str]:
    """The numbers ``text`` states as claims, written as it writes them (commas and
    thousands' braces dropped): those with a decimal point, a % or a ×, and whole numbers
    of 10 or more; chapter and exercise numbers, file names, links, code and
    ``$k = 4$``-style parameters are not claims. ``every``: every number it shows but
    an address's (what a body can state, for a summary to repeat)."""
    text = text.replace("{,}", ",")
    for pattern in _ADDRESSES if every else _NOT_CLAIMS:
        text = pattern.sub(" ", text)
    found = []
    for m in _NUMERAL.finditer(text):
        digits = m.group(1).replace(",", "") + (m.group(2) or "")
        if every or m.group(2) or m.group(3) or int(m.group(1).replace(",", "")) >= 10:
            found.append(digits)
    return found


def summary_numbers_not_in_body(nb: nbformat.NotebookNode) -> list[tuple[int, str]]:
    """(cell, name or numeral) for each number the last Markdown cell ("What to
    remember") states that the Markdown above it does not.

    A glued number passes if the body glues the same name, or shows the same text (the
    value as the website formats it); a glued text with no number in it (a verdict in
    words) is not checked. A literal numeral passes if the body shows the same one. The
    body's numbers are its literals and its glued values as the site shows them, so
    "1.26×" in the summary is found in a body that glues 1.26.
    """
    markdown = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"]
    if len(markdown) < 2:
        return []
    (index, summary), body_cells = markdown[-1], [c for _, c in markdown[:-1]]
    glued = _stored_glue(nb)
    body = "\n".join(c.source for c in body_cells)
    body_glue = {_glue_key(m["role"], m["content"])[0] for m in _ROLE.finditer(body)}
    resolved = _ROLE.sub(lambda m: " " + _shown(m["role"], m["content"], glued) + " ", body)
    in_body = set(numerals(resolved, every=True))
    found = []
    for m in _ROLE.finditer(summary.source):
        key, _ = _glue_key(m["role"], m["content"])
        if key in body_glue:
            continue
        shown = numerals(_shown(m["role"], m["content"], glued), every=True)
        # A small whole number matches some number in almost any body: it must be
        # glued under the same name. A larger or decimal one may match by value.
        if shown and not all(n in in_body and n in numerals(n) for n in shown):
            found.append((index, key))
    literals = _ROLE.sub(" ", summary.source)
    found += [(index, n) for n in numerals(literals) if n not in in_body]
    return found


def test_a_summary_number_the_body_does_not_state_is_caught():
    nb = _synthetic(
        new_markdown_cell(
            "# T\n\nThe speed-up was {glue:text}`speedup:.2f`× over {glue:text}`n` prompts "
            "(chapter 12, $k = 12$, [link](https://example.org/45.5)), with 30% of rounds "
            "and a ratio of 0.71."
        ),
        new_code_cell(
            outputs=[
                new_output(
                    "display_data",
                    data={"text/plain": repr(value)},
                    metadata={"scrapbook": {"name": name, "mime_prefix": ""}},
                )
                for name, value in [
                    ("speedup", 1.2612),
                    ("speedup_again", 1.2634),
                    ("n", 40),
                    ("runs", 7),
                    ("other", 0.97),
                    ("verdict", "none resolved"),
                ]
            ]
        ),
        new_markdown_cell(
            "## What to remember\n\n- {glue:text}`speedup:.2f`× (also "
            "{glue:text}`speedup_again:.2f`) over {glue:text}`n` prompts in "
            "{glue:text}`runs` runs, {glue:text}`verdict`; 30% of rounds; chapter 12 at "
            "$k = 12$; ratio 0.7 (not 0.71), then {glue:text}`other:.2f` and 1.5×; "
            "45.5 and 3 of the 8."
        ),
    )
    assert summary_numbers_not_in_body(nb) == [
        (2, "runs"),  # a small count only the summary glues
        (2, "other"),  # a value the body never showed
        (2, "0.7"),  # rounded differently from the body's 0.71
        (2, "1.5"),
        (2, "45.5"),  # only in a link's address above
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_what_to_remember_states_no_number_the_body_does_not(path):
    _compare(
        summary_numbers_not_in_body(_read(path)),
        KNOWN_SUMMARY_NUMBERS,
        path.name,
        "KNOWN_SUMMARY_NUMBERS",
    )


# --- 4. no two labels of one legend share a swatch ------------------------------------------


def figure_records(nb: nbformat.NotebookNode) -> list[tuple[int, object]]:
    """(cell, record) for every figure a code cell shows that recorded its legends: what
    ``specdec_lib.course.plotting.legend_swatches`` returned when the figure was drawn
    (``use_course_style`` asks the notebook to store it with the PNG)."""
    from specdec_lib.course.plotting import LEGEND_RECORD

    found = []
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            meta = output.get("metadata", {}).get("image/png", {})
            if "image/png" in output.get("data", {}) and LEGEND_RECORD in meta:
                found.append((index, meta[LEGEND_RECORD]))
    return found


def legend_clashes(nb: nbformat.NotebookNode) -> list[tuple[int, str]]:
    """(cell, "label | label") for every set of labels in one legend drawn with one swatch
    (an entry that draws nothing is not a swatch); (cell, "not recorded: ...") where the
    record could not be made."""
    found = []
    for index, record in figure_records(nb):
        if isinstance(record, str):
            found.append((index, record))
            continue
        for legend in record:
            by_swatch: dict[str, set[str]] = {}
            for label, swatch in legend:
                if swatch:
                    by_swatch.setdefault(swatch, set()).add(label)
            found += [(index, " | ".join(sorted(s))) for s in by_swatch.values() if len(s) > 1]
    return found


def _figure_output(fig) -> nbformat.NotebookNode:
    """The output a notebook stores for ``fig``, made by IPython's own display formatter."""
    from IPython.core.interactiveshell import InteractiveShell

    from specdec_lib.course.plotting import use_course_style

    shell = InteractiveShell.instance()
    use_course_style()
    data, metadata = shell.display_formatter.format(fig)
    return new_output("display_data", data=data, metadata=metadata)


def test_a_legend_with_two_labels_on_one_swatch_is_caught():
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    from specdec_lib.course.plotting import COLORS, legend_swatches

    fig, (left, right) = plt.subplots(1, 2)
    # chapter 0's old slip: the rejections' handle came from a panel without any, so it
    # drew the target's blue box
    left.bar([0], [1], color=COLORS["target"], label="target's own token")
    left.bar([1], [1], color=COLORS["target"], label="rejected proposals")
    left.bar([2], [1], color=COLORS["target"], label="target's own token")  # same label
    left.bar([3], [1], color=COLORS["target"], hatch="//", label="hatched")
    left.plot([0, 1], [0, 1], color=COLORS["draft"], marker="o", label="draft, o")
    left.plot([0, 1], [1, 0], color=COLORS["draft"], marker="s", label="draft, s")
    left.plot([0, 1], [1, 1], color=COLORS["draft"], linestyle="--", label="draft, dashed")
    left.legend()
    right.errorbar([0, 1], [1, 2], yerr=0.1, fmt="o", color="k", label="first run")
    right.errorbar([0, 1], [2, 3], yerr=0.1, fmt="o", color="k", label="second run")
    right.scatter([0], [1], color="k", marker="^", label="triangle")
    right.legend()
    fig.legend(handles=[Patch(color="red", label="a"), Patch(color="blue", label="b")])
    swatches = legend_swatches(fig)
    assert [len(legend) for legend in swatches] == [2, 7, 3]
    _figure_output(fig)  # the style applied twice still stores one PNG and one record
    output = _figure_output(fig)
    assert isinstance(output.data["image/png"], str)
    assert output.metadata["image/png"]["specdec_legends"] == swatches
    nb = _synthetic(new_markdown_cell("# T"), new_code_cell(outputs=[output]))
    plt.close(fig)
    assert legend_clashes(nb) == [
        (1, "rejected proposals | target's own token"),
        (1, "first run | second run"),
    ]
    nb.cells[1].outputs[0].metadata["image/png"]["specdec_legends"] = "not recorded: boom"
    assert legend_clashes(nb) == [(1, "not recorded: boom")]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_no_legend_shows_two_labels_with_one_swatch(path):
    nb = _read(path)
    figures = [
        index
        for index, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        for output in cell.outputs
        if "image/png" in output.get("data", {})
    ]
    recorded = [index for index, _ in figure_records(nb)]
    if figures and not recorded:
        pytest.skip(
            f"{path.name}: its figures (cells {figures}) were stored before figures recorded "
            "their legends; re-execute it to check them"
        )
    # Once a chapter records, every figure must: one drawn before use_course_style() (or
    # not by matplotlib) would go unchecked.
    assert recorded == figures, f"{path.name}: figures with no legend record, cells " + str(
        sorted(set(figures) - set(recorded))
    )
    _compare(legend_clashes(nb), KNOWN_LEGEND_CLASHES, path.name, "KNOWN_LEGEND_CLASHES")
