"""Written answers: a student notebook has an answer cell wherever a chapter asks for one,
and the nbgrader source becomes the student notebook under nbgrader's own rules."""

import re
import sys
from pathlib import Path

import nbformat
import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
sys.path.insert(0, str(SCRIPTS))

import coursework as C  # noqa: E402
import student_notebooks as S  # noqa: E402

CHAPTERS = S.chapter_notebooks(C.CHAPTERS)
OPEN = re.compile(r"^[ \t]*(`{3,}|:{3,})\{(?P<name>[\w-]+)\}[ \t]*(?P<arg>\S*)")


def written_answers_asked(nb: nbformat.NotebookNode) -> list[str]:
    """Exercises that ask for prose, read from the chapter independently of the generator:
    a solution that is prose only (a ``{solution}`` directive, or a gated solution with no
    code cell), or an exercise marked ``:class: written``."""
    asked, written, gated, code_inside = [], set(), None, False
    for cell in nb.cells:
        if cell.cell_type == "code" and gated is not None and cell.source.strip():
            code_inside = True
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.split("\n")
        for i, line in enumerate(lines):
            opened = OPEN.match(line)
            if not opened:
                continue
            name, arg = opened.group("name"), opened.group("arg")
            if name in ("exercise", "exercise-start"):
                options = "\n".join(lines[i + 1 : i + 4])
                label = re.search(r":label:\s*(\S+)", options)
                if label and re.search(r":class:.*\bwritten\b", options):
                    written.add(label.group(1))
            elif name == "solution":
                asked.append(arg)
            elif name == "solution-start":
                gated, code_inside = arg, False
            elif name == "solution-end":
                if not code_inside or gated in written:
                    asked.append(gated)
                gated = None
    return asked


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_a_student_notebook_has_an_answer_cell_wherever_a_written_answer_is_asked(path):
    chapter = nbformat.read(path, as_version=4)
    student = S.student_notebook(chapter, path.name)
    assert S.answer_cells(student) == written_answers_asked(chapter)
    for cell in student.cells:
        if S.ANSWER_KEY in cell.metadata:
            assert cell.cell_type == "markdown" and cell.source == S.MARKDOWN_STUB


def test_every_notebook_chapter_asks_for_at_least_one_written_answer():
    # The teachers' page says so; the optional appendix has only a code exercise.
    for path in CHAPTERS:
        if path.name.startswith("appendix"):
            continue
        chapter = nbformat.read(path, as_version=4)
        assert written_answers_asked(chapter), path.name


def test_the_answer_cell_stands_where_the_solution_was():
    nb = nbformat.v4.new_notebook()
    sources = [
        "```{exercise-start}\n:label: ex-both\n:class: written\n```\nWrite f; say why.\n"
        "```{exercise-end}\n```\n\n```{solution-start} ex-both\n:class: dropdown\n```\n"
        "The idea, in prose.",
        "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION",
        "```{solution-end}\n```\n\nCheck it:",
        "```{exercise-start}\n:label: ex-code\n```\nWrite g.\n```{exercise-end}\n```\n\n"
        "```{solution-start} ex-code\n:class: dropdown\n```",
        "def g():\n    ### BEGIN SOLUTION\n    return 2\n    ### END SOLUTION",
        "```{solution-end}\n```",
    ]
    for i, source in enumerate(sources):
        make = (
            nbformat.v4.new_code_cell if source.startswith("def") else nbformat.v4.new_markdown_cell
        )
        nb.cells.append(make(source, id=f"c{i}"))
    student = S.student_notebook(nb)
    ids = [cell.id for cell in student.cells]
    assert ids == [S.NOTE_ID, "c0", "c1", "answer-ex-both", "c2", "c3", "c4"]
    assert S.answer_cells(student) == ["ex-both"]  # ex-code asks for code only
    source = S.student_notebook(nb, keep_solutions=True)
    answer = next(c for c in source.cells if c.id == "answer-ex-both")
    assert answer.source == "The idea, in prose."  # the nbgrader source keeps the model answer


def _nbgrader_release(source: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """What ``nbgrader generate_assignment`` (its ClearSolutions step) makes of a source
    notebook: solution regions in solution cells become stubs; a solution cell without
    regions is replaced whole, by the code stub or by ``YOUR ANSWER HERE``."""
    out = nbformat.from_dict(source)
    for cell in out.cells:
        text, regions = S.replace_solutions(
            cell.source, S.CODE_STUB if cell.cell_type == "code" else S.MARKDOWN_STUB
        )
        if regions:
            assert cell.metadata.get("nbgrader", {}).get("solution"), cell.id  # else nbgrader fails
            cell.source = text
        elif cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = (
                S.CODE_STUB.format(indent="") if cell.cell_type == "code" else S.MARKDOWN_STUB
            )
    return out


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_the_nbgrader_source_becomes_the_student_notebook_and_leaks_no_solution(path):
    chapter = nbformat.read(path, as_version=4)
    source = S.nbgrader_notebook(chapter, path.name)
    student = S.student_notebook(chapter, path.name)
    text = "\n".join(cell.source for cell in source.cells)
    assert not re.search(r"\{solution(-start|-end)?\}", text), "a solution dropdown survived"
    release = _nbgrader_release(source)
    pairs = list(zip(release.cells, student.cells, strict=True))
    for theirs, ours in pairs:
        assert theirs.id == ours.id
        if theirs.id != S.NOTE_ID:
            assert theirs.source == ours.source, theirs.id
    meta = {cell.id: cell.metadata.get("nbgrader") for cell in source.cells}
    for label in S.answer_cells(source):
        m = meta[S.answer_cell_id(label)]
        assert m["solution"] and m["grade"] and m["points"] == 1  # manually graded answer
    for call in S.check_calls(source):
        if call.subject in S.stub_definitions(student):
            m = meta[call.cell_id]
            assert m["grade"] and m["locked"] and not m["solution"]  # autograder tests
    grade_ids = [m["grade_id"] for m in meta.values() if m]
    assert len(grade_ids) == len(set(grade_ids))


def test_the_nbgrader_command_writes_one_assignment_per_chapter(tmp_path):
    assert C.main(["nbgrader", str(tmp_path)]) == 0
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.ipynb"))
    assert written == [f"source/{p.stem}/{p.name}" for p in CHAPTERS]
