"""The pages about the course name only exercises, checkers, chapters and notebooks that exist.

The landing page (intro.md), the how-to page and the teachers' page describe the chapters
from outside them, so nothing re-checks what they say when a chapter changes. These tests
read every exercise label (``ex-...``), checker (``check_...``), chapter number ("chapter
7b", "chapters 0 and 1", "Exercise 6.2"), notebook file name and ``{doc}`` target the pages
mention, and fail on one that does not exist; a description of a chapter's exercise ("chapter
3 and its $n$-gram exercise") must match an exercise that chapter has. The teachers' table of
chapters is checked row by row against the notebooks: title, number and the checkers each
calls. The facts come from the notebooks themselves (their ``{exercise}`` directives, the
checkers their code calls, the stored results they load) and from ``_toc.yml``.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

from specdec_lib.grading import CHECKS

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "chapters"
PAGES = ["intro.md", "how_to_use.md", "for_teachers.md"]

sys.path.insert(0, str(ROOT / "scripts"))
import book_numbering  # noqa: E402
import book_toc  # noqa: E402
from student_notebooks import answer_cells, stub_count, student_notebook  # noqa: E402

# A directive's opening fence and its options: ```{exercise} or ::::{exercise-start}.
_DIRECTIVE = re.compile(
    r"^(?P<fence>:{3,}|`{3,})\{(?P<name>[\w:-]+)\}[^\n]*\n(?P<options>(?::\w[\w-]*:[^\n]*\n)*)",
    re.M,
)
_ORDINALS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth"]
# "chapter 7b", "chapters 0 and 1", "chapters 4, 5, 7, 7b, 9 and 10", "chapters 9 to 13".
_NUMBER = r"\d+b?"
_CHAPTER_LIST = re.compile(
    rf"\b[Cc]hapters?\s+(?P<list>{_NUMBER}(?:(?:,\s*(?:and\s+)?|\s+and\s+|\s+to\s+){_NUMBER}\b)*)"
)
_APPENDIX = re.compile(r"\b[Aa]ppendix\s+(?P<letter>[A-Z])\b")
# "Exercise 6.2", "Theorem 8.1": the n-th of its kind in chapter X.
_NUMBERED = re.compile(
    r"\b(?P<kind>Exercise|Theorem|Proposition)\s+(?P<chapter>\d+b?|[A-Z])\.(?P<n>\d+)\b"
)
# "chapter 6's second exercise", "chapter 8's first theorem".
_ORDINAL = re.compile(
    rf"\bchapter\s+(?P<chapter>{_NUMBER})'s\s+(?P<ordinal>{'|'.join(_ORDINALS)})\s+"
    r"(?P<kind>exercise|theorem|proposition)\b",
    re.I,
)
# "chapter 3 and its $n$-gram exercise", "chapter 6 and the residual-rule exercise",
# "chapter 12's exercises": the chapter must have one, and one that fits the description.
_DESCRIBED = re.compile(
    rf"\bchapter\s+(?P<chapter>{_NUMBER})(?:'s|\s+and\s+its|\s+and\s+the)\s+"
    r"(?P<what>[^.;:()]{0,60}?)\s*\bexercises?\b",
    re.I,
)
_NOTEBOOK = re.compile(r"\b(?P<stem>\d\d[a-z]?_[a-z0-9_]+|appendix_[a-z]_[a-z0-9_]+)(?:\.ipynb)?\b")
_DOC = re.compile(r"\{doc\}`(?:[^`<]*<)?(?P<target>[^`>]+)>?`")
_LABEL = re.compile(r"\bex-[a-z0-9]+(?:-[a-z0-9]+)*\b")
_CHECKER = re.compile(r"\bcheck_[a-z0-9_]+\b")


@dataclass
class Chapter:
    """What one notebook holds, as the pages may describe it."""

    number: str  # "0" ... "13", "7b", "A", "B"
    stem: str  # "03_ngram_drafter"
    title: str  # its first heading, without "Appendix A: "
    exercises: list[str] = field(default_factory=list)  # labels, in order
    exercise_text: str = ""  # every exercise's text, normalised
    counts: dict[str, int] = field(default_factory=dict)  # directive kind -> how many
    checks: set[str] = field(default_factory=set)  # checkers its code calls
    loads_results: bool = False  # reads a stored benchmark result
    written: int = 0  # written-answer cells in its student version
    code_stubs: int = 0  # code stubs in its student version


def normalise(text: str) -> str:
    """Lower case, no math dollars, backticks or hyphens: "$n$-gram" reads as "n gram"."""
    text = re.sub(r"[$`*_]", "", text.lower()).replace("-", " ")
    return re.sub(r"\s+", " ", text).strip()


def _exercise_blocks(markdown: str) -> list[tuple[str, str]]:
    """(label, text) of every exercise: the directive and what follows, up to its end."""
    blocks = []
    for match in _DIRECTIVE.finditer(markdown):
        if match["name"] not in ("exercise", "exercise-start"):
            continue
        label = re.search(r"^:label:\s*(\S+)", match["options"], re.M)
        # An {exercise} ends at its own fence; an {exercise-start} at {exercise-end}.
        if match["name"] == "exercise":
            closing = rf"^{re.escape(match['fence'])}\s*$"
        else:
            closing = r"^(?::{3,}|`{3,})\{exercise-end\}"
        end = re.search(closing, markdown[match.end() :], re.M)
        text = markdown[match.end() : match.end() + (end.start() if end else len(markdown))]
        blocks.append((label.group(1) if label else "", text))
    return blocks


@functools.cache
def chapters() -> dict[str, Chapter]:
    """Every notebook in the table of contents, by its chapter number."""
    found = {}
    for entry in book_toc.toc_files(ROOT):
        stem = entry.removesuffix(".ipynb").removesuffix(".md")
        path = ROOT / f"{stem}.ipynb"
        if not path.is_file():
            continue
        nb = nbformat.read(path, as_version=4)
        markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        heading = re.search(r"^# (.+)$", markdown, re.M).group(1)
        number = book_numbering.chapter_number(stem)
        blocks = _exercise_blocks(markdown)
        counts: dict[str, int] = {}
        for match in _DIRECTIVE.finditer(markdown):
            kind = match["name"].removeprefix("prf:").removesuffix("-start")
            counts[kind] = counts.get(kind, 0) + 1
        # The student version, for its answer cells and stubs; glued numbers need not
        # resolve for that, so they are blanked first.
        blanked = nbformat.from_dict(nb)
        for cell in blanked.cells:
            if cell.cell_type == "markdown":
                cell.source = re.sub(r"\{glue:text\}`[^`]*`", "0", cell.source)
        student = student_notebook(blanked)
        found[number] = Chapter(
            number=number,
            stem=path.stem,
            title=re.sub(r"^Appendix [A-Z]: ", "", heading),
            exercises=[label for label, _ in blocks],
            exercise_text=" ".join(normalise(f"{label} {text}") for label, text in blocks),
            counts=counts,
            checks={name for name in CHECKS if re.search(rf"\b{name}\(", code)},
            loads_results=bool(re.search(r"\bload_result\(", code)),
            written=len(answer_cells(student)),
            code_stubs=sum(stub_count(c.source) for c in student.cells if c.cell_type == "code"),
        )
    return found


def page(name: str) -> str:
    return (CHAPTERS / name).read_text(encoding="utf-8")


def chapter_list(text: str) -> list[str]:
    """The chapter numbers a list such as "4, 5, 7, 7b, 9 and 10" or "9 to 13" names."""
    order = list(chapters())
    numbers: list[str] = []
    tokens = re.findall(rf"{_NUMBER}|\bto\b", text)
    for i, token in enumerate(tokens):
        if token == "to" or (i and tokens[i - 1] == "to"):
            continue
        if i + 2 < len(tokens) and tokens[i + 1] == "to":
            last = tokens[i + 2]
            if token in order and last in order:
                numbers += order[order.index(token) : order.index(last) + 1]
            else:
                numbers += [token, last]
        else:
            numbers.append(token)
    return numbers


def chapters_named(text: str) -> list[str]:
    """Every chapter and appendix ``text`` names, as chapter numbers ("7b", "A")."""
    named = [n for m in _CHAPTER_LIST.finditer(text) for n in chapter_list(m["list"])]
    named += [m["letter"] for m in _APPENDIX.finditer(text)]
    named += [m["chapter"] for m in _NUMBERED.finditer(text)]
    return named


def _found(pattern: re.Pattern, group: int | str = 0) -> list[tuple[str, str]]:
    return [(name, m.group(group)) for name in PAGES for m in pattern.finditer(page(name))]


# --- names ---------------------------------------------------------------------------------


def test_the_facts_are_read():
    # The parsers above find what they look for: a chapter of each kind, and its exercises.
    facts = chapters()
    assert {"0", "7b", "13", "A", "B"} <= set(facts)
    assert facts["6"].exercises == ["ex-implement-accept-sampled", "ex-one-hot-shortcut"]
    assert facts["3"].checks == {"check_ngram_drafter"} and facts["8"].counts["theorem"] >= 1
    assert facts["A"].title == "how TinyGPT was built and trained"
    assert chapter_list("4, 5, 7, 7b, 9 and 10") == ["4", "5", "7", "7b", "9", "10"]
    assert chapter_list("1, 2 and 9 to 11") == ["1", "2", "9", "10", "10b", "11"]
    assert chapters_named("chapters 0 and 1, appendix A's curve; Exercise 6.2") == [
        "0",
        "1",
        "A",
        "6",
    ]


def test_every_exercise_label_a_page_names_exists():
    known = {label for chapter in chapters().values() for label in chapter.exercises}
    known |= {m for name in PAGES for m in re.findall(r"^:label:\s*(\S+)", page(name), re.M)}
    missing = [(name, label) for name, label in _found(_LABEL) if label not in known]
    assert not missing, f"exercise labels no chapter defines: {missing}"


def test_every_checker_a_page_names_exists():
    missing = [(name, check) for name, check in _found(_CHECKER) if check not in CHECKS]
    assert not missing, f"checkers specdec_lib.grading does not have: {missing}"


def test_every_chapter_a_page_names_exists():
    known = set(chapters())
    missing = [
        (name, number)
        for name in PAGES
        for number in chapters_named(page(name))
        if number not in known
    ]
    assert not missing, f"chapters the table of contents does not have: {missing}"


def test_every_notebook_and_page_a_page_names_exists():
    stems = {p.stem for p in CHAPTERS.glob("*.ipynb")}
    missing = [(name, stem) for name, stem in _found(_NOTEBOOK, "stem") if stem not in stems]
    pages = {p.stem for p in CHAPTERS.glob("*.md")} | stems
    missing += [(name, doc) for name, doc in _found(_DOC, "target") if doc not in pages]
    assert not missing, f"notebooks or pages that do not exist: {missing}"


# --- numbers and descriptions ---------------------------------------------------------------


def test_every_numbered_exercise_or_theorem_a_page_names_exists():
    facts = chapters()
    wrong = []
    for name in PAGES:
        text = page(name)
        wanted = [(m["chapter"], m["kind"].lower(), int(m["n"])) for m in _NUMBERED.finditer(text)]
        wanted += [
            (m["chapter"], m["kind"].lower(), _ORDINALS.index(m["ordinal"].lower()) + 1)
            for m in _ORDINAL.finditer(text)
        ]
        for chapter, kind, n in wanted:
            have = facts[chapter].counts.get(kind, 0) if chapter in facts else 0
            if have < n:
                wrong.append(f"{name}: {kind} {chapter}.{n} (chapter {chapter} has {have})")
    assert not wrong, wrong


def test_every_described_exercise_is_one_its_chapter_has():
    # "chapter 4 and its greedy-acceptance exercise" must name an exercise chapter 4 has:
    # its words must appear in one of that chapter's exercises, or in the teachers' table's
    # description of the chapter's graded exercise.
    facts = chapters()
    graded = {number: normalise(row["graded"]) for number, row in teachers_table().items()}
    wrong = []
    for name, match in ((n, m) for n in PAGES for m in _DESCRIBED.finditer(page(n))):
        chapter = facts.get(match["chapter"])
        filler = "|".join(["own", "its", "the", "code", "written", *_ORDINALS])
        what = normalise(re.sub(rf"\b({filler})\b", "", match["what"]))
        if chapter is None or not chapter.exercises:
            wrong.append(f"{name}: {match.group(0)!r}: chapter has no exercise")
        elif (
            what
            and what not in chapter.exercise_text
            and what not in graded.get(chapter.number, "")
        ):
            wrong.append(
                f"{name}: {match.group(0)!r}: no exercise of chapter {chapter.number} fits"
            )
    assert not wrong, wrong


# --- the teachers' page ------------------------------------------------------------------------


@functools.cache
def teachers_table() -> dict[str, dict[str, str]]:
    """The rows of "What each chapter teaches", by the chapter number of the notebook linked."""
    rows = {}
    for line in page("for_teachers.md").splitlines():
        match = re.match(
            r"^\| \[(?P<text>[^\]]+)\]\((?P<file>[^)]+\.ipynb)\)(?P<rest>.*)\|\s*$", line
        )
        if match:
            cells = [c.strip() for c in match["rest"].split("|")]
            number = book_numbering.chapter_number(Path(match["file"]).stem)
            rows[number] = {"text": match["text"], "file": match["file"], "graded": cells[-1]}
    return rows


def test_the_teachers_table_has_a_row_for_every_chapter():
    assert list(teachers_table()) == list(chapters())


NUMBERS = [  # the table of contents' notebooks, read without opening them
    book_numbering.chapter_number(entry.removesuffix(".ipynb").removesuffix(".md"))
    for entry in book_toc.toc_files(ROOT)
    if (ROOT / (entry.removesuffix(".ipynb").removesuffix(".md") + ".ipynb")).is_file()
]


@pytest.mark.parametrize("number", NUMBERS)
def test_the_teachers_table_row_matches_its_chapter(number):
    row, chapter = teachers_table()[number], chapters()[number]
    assert row["file"] == f"{chapter.stem}.ipynb"
    shown = re.match(r"^(?:(?P<number>\d+b?|[A-Z])\. )?(?P<title>.*)$", row["text"])
    assert shown["number"] in (None, number), f"row {row['text']!r} numbered for another chapter"
    assert shown["title"].lower() == chapter.title.lower(), (shown["title"], chapter.title)
    named = set(_CHECKER.findall(row["graded"]))
    assert named == chapter.checks, (
        f"the teachers' table says chapter {number} grades {sorted(named)}; "
        f"its code calls {sorted(chapter.checks)}"
    )


def test_the_code_exercises_the_teachers_page_lists_are_graded_ones():
    # "some ask for code (implement the speculative loop, ...)": each is in the table.
    text = page("for_teachers.md")
    match = re.search(r"ask for code \(implement (?P<list>[^);]*)", text)
    assert match, "the teachers' page no longer lists the code exercises"
    items = [normalise(i) for i in re.split(r",\s*(?:and\s+)?", match["list"])]
    graded = " ".join(normalise(row["graded"]) for row in teachers_table().values())
    missing = [i for i in items if i not in graded]
    assert not missing, f"code exercises no chapter grades: {missing}"


def test_what_the_teachers_page_says_about_written_and_code_exercises():
    text = normalise(page("for_teachers.md"))
    facts = chapters()
    if "every chapter asks at least one written question" in text:
        silent = [n for n, c in facts.items() if not c.written and n not in ("A", "B")]
        assert not silent, f"chapters with no written question: {silent}"
    if "a has a code exercise alone and b a written one" in text:
        assert facts["A"].code_stubs and not facts["A"].written
        assert facts["B"].written and not facts["B"].code_stubs


# --- the how-to page ------------------------------------------------------------------------


def test_the_chapters_said_to_read_stored_results_are_those_that_do():
    text = page("how_to_use.md")
    paragraph = next(p for p in text.split("\n\n") if "load_result(" in p)
    sentence = paragraph[paragraph.index("load_result(") :]
    named = set(chapters_named(sentence))
    if "both appendices" in sentence or "the appendices" in sentence:
        named |= {"A", "B"}
    if "the page on real engines" in sentence:
        named.add("11")
    reading = {n for n, c in chapters().items() if c.loads_results}
    assert named == reading, (
        f"how_to_use.md says chapters {sorted(named)} read stored results; "
        f"these do: {sorted(reading)}"
    )
