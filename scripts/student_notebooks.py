"""Student notebooks: generated from the chapters, with a stub exactly where each solution was.

Used by ``scripts/coursework.py`` (``student`` and ``check``) and by the tests.
Student notebooks are generated, never edited by hand, so they cannot drift from
the chapters. A chapter marks what students must write the way nbgrader does:

* in a code cell, the lines between ``### BEGIN SOLUTION`` and ``### END SOLUTION``
  become ``# YOUR CODE HERE`` and ``raise NotImplementedError()`` (indented like
  the ``BEGIN`` line, so a function body stays a function body);
* in a Markdown cell, the same markers around a written answer become
  ``YOUR ANSWER HERE``;
* sphinx-exercise solutions disappear: a gated ``{solution-start}`` …
  ``{solution-end}`` pair with everything between them (Markdown text removed;
  code cells kept but stubbed, whole cells if they carry no markers), and any
  single ``{solution}`` directive;
* where a solution was prose only (a single ``{solution}``, or a gated one with no
  code cell), or its exercise is marked ``:class: written``, a Markdown cell
  ``YOUR ANSWER HERE`` takes its place: the written-answer cell;
* every glued number in the prose (``{glue:text}`name:spec```) is written in, as the
  website shows it, from the chapter's stored outputs (``scripts/resolve_glue.py``):
  a student notebook has no outputs, and no myst-nb to paste them, so a role would be
  all the student saw;
* outputs and execution counts are cleared.
"""

from __future__ import annotations
import __future__

import ast
import csv
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

# A script of the repository uses the repository's library, not whichever one is installed.
REPOSITORY = Path(__file__).resolve().parent.parent
if sys.path[:1] != [str(REPOSITORY)]:
    sys.path.insert(0, str(REPOSITORY))

from book_numbering import chapter_number  # noqa: E402

from specdec_lib.grading import CHECKS  # noqa: E402

from resolve_glue import count_glue_roles, resolve_glue  # noqa: E402

BEGIN = re.compile(r"^(?P<indent>[ \t]*)### BEGIN SOLUTION[ \t]*$")
END = re.compile(r"^[ \t]*### END SOLUTION[ \t]*$")
CODE_STUB = "{indent}# YOUR CODE HERE\n{indent}raise NotImplementedError()"
MARKDOWN_STUB = "YOUR ANSWER HERE"
# A MyST directive fence: three or more backticks or colons, then {name}.
FENCE_OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}|:{3,})\{(?P<name>[\w-]+)\}")
SOLUTION_DIRECTIVES = {"solution", "solution-start", "solution-end"}
NOTE_ID = "student-version-note"
ANSWER_KEY = "specdec_answer"  # cell metadata: the exercise a written-answer cell answers
WHOLE_SOLUTION_KEY = "specdec_whole_solution"  # a solution cell without markers
NOTE = (
    "**Student version.** Generated from the course's chapter by "
    "`python scripts/coursework.py student`; do not edit it by hand. Write your code "
    "where a cell says `# YOUR CODE HERE` (delete the `raise NotImplementedError()` line), "
    "and your answers where it says `YOUR ANSWER HERE`. Cells that call a `check_…` "
    "function tell you whether your code is right and, if not, what is wrong; on an "
    "exercise you have not started they say TO DO and let the notebook run on. The numbers "
    "in the prose are those of the course's own run, written in when this notebook was "
    "generated; the cells that compute them may print slightly different ones on your machine."
)


# ---------------------------------------------------------------------------------
# Generating student notebooks
# ---------------------------------------------------------------------------------


def replace_solutions(source: str, stub: str, where: str = "cell") -> tuple[str, int]:
    """``source`` with each ``BEGIN``/``END SOLUTION`` region replaced by ``stub``; region count.

    ``stub`` may use ``{indent}``, the indentation of the ``BEGIN`` line. Unbalanced
    or nested markers are an authoring error and raise ``ValueError``.
    """
    out: list[str] = []
    regions = 0
    inside = False
    for number, line in enumerate(source.split("\n"), start=1):
        begin, end = BEGIN.match(line), END.match(line)
        if begin:
            if inside:
                raise ValueError(f"{where}, line {number}: BEGIN SOLUTION inside another region")
            inside = True
            regions += 1
            out.append(stub.format(indent=begin.group("indent")))
        elif end:
            if not inside:
                raise ValueError(f"{where}, line {number}: END SOLUTION without BEGIN SOLUTION")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{where}: BEGIN SOLUTION without END SOLUTION")
    return "\n".join(out), regions


def _directive_end(lines: list[str], start: int, fence: str) -> int:
    """Index of the line that closes the directive opened at ``lines[start]``."""
    closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
    for i in range(start + 1, len(lines)):
        if closing.match(lines[i]):
            return i
    return len(lines) - 1


@dataclass
class _Solutions:
    """State carried across cells: are we inside a gated solution, and what did it hold?"""

    inside: bool = False
    label: str = ""
    code_seen: bool = False  # a code cell inside the gated solution: a code exercise
    removed: list[str] = field(default_factory=list)  # the solution's prose
    written: set[str] = field(default_factory=set)  # exercises marked ``:class: written``
    removed_markdown: int = 0


@dataclass(frozen=True)
class Answer:
    """Where a written answer goes: the exercise's label, and the prose the solution held."""

    label: str
    solution: str


def _directive_options(lines: list[str], start: int) -> dict[str, str]:
    """The ``:name: value`` option lines right after the directive opened at ``lines[start]``."""
    options = {}
    for line in lines[start + 1 :]:
        found = re.match(r"^[ \t]*:(?P<name>[\w-]+):[ \t]*(?P<value>.*)$", line)
        if not found:
            break
        options[found.group("name")] = found.group("value").strip()
    return options


def _directive_argument(line: str) -> str:
    return line.split("}", 1)[1].strip() if "}" in line else ""


def _solution_text(lines: list[str]) -> str:
    """A directive's body: its lines without the option lines at the top."""
    body = list(lines)
    while body and re.match(r"^[ \t]*:[\w-]+:", body[0]):
        body.pop(0)
    return "\n".join(body).strip("\n")


def _strip_markdown(source: str, state: _Solutions, where: str) -> list[str | Answer]:
    """``source`` without its solutions, as pieces of text with an ``Answer`` where a
    written answer belongs (after a prose-only solution, or one of a ``written`` exercise)."""
    lines = source.split("\n")
    pieces: list[str | Answer] = []
    kept: list[str] = []
    if state.inside and state.removed:
        state.removed.append("")  # a new cell: a new paragraph

    def answer(label: str, solution: str) -> None:
        pieces.append("\n".join(kept).strip("\n"))
        kept.clear()
        pieces.append(Answer(label, solution))

    i = 0
    while i < len(lines):
        opened = FENCE_OPEN.match(lines[i])
        name = opened.group("name") if opened else None
        if name in ("exercise", "exercise-start"):
            options = _directive_options(lines, i)
            if "written" in options.get("class", "").split() and "label" in options:
                state.written.add(options["label"])
        if name in SOLUTION_DIRECTIVES:
            end = _directive_end(lines, i, opened.group("fence"))
            label = _directive_argument(lines[i])
            if name == "solution":
                answer(label, _solution_text(lines[i + 1 : end]))
            elif name == "solution-start":
                if state.inside:
                    raise ValueError(f"{where}: solution-start inside another solution")
                state.inside, state.label, state.code_seen = True, label, False
                state.removed = []
            else:  # solution-end
                if not state.inside:
                    raise ValueError(f"{where}: solution-end without solution-start")
                state.inside = False
                if not state.code_seen or state.label in state.written:
                    answer(state.label, "\n".join(state.removed).strip("\n"))
            i = end + 1
            continue
        if state.inside:
            state.removed.append(lines[i])
        else:
            kept.append(lines[i])
        i += 1
    pieces.append("\n".join(kept).strip("\n"))
    return [p for p in pieces if isinstance(p, Answer) or p.strip()]


def answer_cell_id(label: str) -> str:
    """A valid, unique cell id for the answer cell of exercise ``label``."""
    return ("answer-" + re.sub(r"[^A-Za-z0-9_-]", "-", label))[:64]


def _answer_cell(answer: Answer, keep_solutions: bool) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_markdown_cell(
        answer.solution if keep_solutions and answer.solution else MARKDOWN_STUB
    )
    cell.id = answer_cell_id(answer.label)
    cell.metadata[ANSWER_KEY] = answer.label
    return cell


def student_notebook(
    nb: nbformat.NotebookNode, name: str = "notebook", keep_solutions: bool = False
) -> nbformat.NotebookNode:
    """The student version of a chapter notebook (a new object; ``nb`` is not modified).

    With ``keep_solutions`` (the nbgrader source, see ``nbgrader_notebook``), code
    solutions keep their markers and written answers hold the model answer; the
    solution dropdowns are removed either way. Glued numbers are written into the prose
    first, while the outputs that hold them are still there.
    """
    nb = nbformat.from_dict(json.loads(json.dumps(resolve_glue(nb, name))))
    state = _Solutions()
    cells = []
    for index, cell in enumerate(nb.cells):
        where = f"{name}, cell {index}"
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            source, regions = replace_solutions(cell.source, CODE_STUB, where)
            if state.inside and source.strip():
                state.code_seen = True
                if not regions:
                    # A solution cell without markers: all of it is the solution.
                    source, regions = CODE_STUB.format(indent=""), 1
                    if keep_solutions:
                        cell.metadata[WHOLE_SOLUTION_KEY] = True
            if not keep_solutions:
                cell.source = source
            cells.append(cell)
        elif cell.cell_type == "markdown":
            source, _ = replace_solutions(cell.source, MARKDOWN_STUB, where)
            pieces = _strip_markdown(source, state, where)
            if not pieces:
                state.removed_markdown += 1
            first = True
            for n, piece in enumerate(pieces):
                if isinstance(piece, Answer):
                    cells.append(_answer_cell(piece, keep_solutions))
                    continue
                part = cell if first else nbformat.v4.new_markdown_cell(piece)
                part.source = piece
                if not first:
                    part.id = f"{cell.id}-{n}"[:64]
                first = False
                cells.append(part)
        else:
            cells.append(cell)
    if state.inside:
        raise ValueError(f"{name}: solution-start without solution-end")
    note = nbformat.v4.new_markdown_cell(NOTE)
    note.id = NOTE_ID
    at = 1 if cells and cells[0].cell_type == "code" else 0  # after the Colab set-up cell
    cells.insert(at, note)
    nb.cells = cells
    nb.metadata.pop("widgets", None)
    nb.metadata["specdec_student_version"] = {"chapter": name}
    return nb


def answer_cells(nb: nbformat.NotebookNode) -> list[str]:
    """The exercise labels of the written-answer cells of a generated notebook, in order."""
    return [cell.metadata[ANSWER_KEY] for cell in nb.cells if ANSWER_KEY in cell.metadata]


NBGRADER_NOTE = (
    "**nbgrader source.** Generated from the course's chapter by "
    "`python scripts/coursework.py nbgrader`; regenerate it rather than edit it. "
    "`nbgrader generate_assignment` turns it into the student version: the code between "
    "each pair of solution markers becomes a stub, and each written answer (a manually "
    "graded cell holding the model answer) becomes `YOUR ANSWER HERE`."
)


def _nbgrader(cell_id: str, *, solution: bool, grade: bool, locked: bool) -> dict:
    meta = {
        "grade": grade,
        "grade_id": cell_id,
        "locked": locked,
        "schema_version": 3,
        "solution": solution,
        "task": False,
    }
    if grade:
        meta["points"] = 1
    return meta


def nbgrader_notebook(nb: nbformat.NotebookNode, name: str = "notebook") -> nbformat.NotebookNode:
    """The chapter as an nbgrader *source* notebook (a new object).

    Like the student version, every solution dropdown is gone, so nothing leaks
    through nbgrader (which knows nothing of MyST directives). Unlike it, code
    solutions keep their markers, in cells marked "Autograded answer"; a solution
    cell without markers is marked so too, and nbgrader replaces it whole, as the
    student version does. Each written answer is a "Manually graded answer" cell
    holding the model answer, and each cell that calls a checker on an exercise is a
    locked "Autograder tests" cell worth one point (the checks call
    ``.raise_if_failed()``, so a failing check raises and scores nothing).
    """
    out = student_notebook(nb, name, keep_solutions=True)
    exercises = set(stub_definitions(student_notebook(nb, name)))  # what students write
    graded = {call.cell_id for call in check_calls(out) if call.subject in exercises}
    for cell in out.cells:
        if cell.id == NOTE_ID:
            cell.source = NBGRADER_NOTE
        elif ANSWER_KEY in cell.metadata:
            cell.metadata["nbgrader"] = _nbgrader(cell.id, solution=True, grade=True, locked=False)
        elif cell.cell_type == "code" and (
            cell.metadata.pop(WHOLE_SOLUTION_KEY, False)
            or replace_solutions(cell.source, CODE_STUB)[1]
        ):
            cell.metadata["nbgrader"] = _nbgrader(cell.id, solution=True, grade=False, locked=False)
        elif cell.id in graded:
            cell.metadata["nbgrader"] = _nbgrader(cell.id, solution=False, grade=True, locked=True)
    out.metadata["specdec_student_version"] = {"chapter": name, "nbgrader_source": True}
    return out


def write_nbgrader_source(course: Path, chapters: Path) -> list[Path]:
    """Write ``course/source/<chapter>/<chapter>.ipynb``, one nbgrader assignment per chapter."""
    written = []
    for path in chapter_notebooks(chapters):
        nb = nbformat.read(path, as_version=4)
        target = course / "source" / path.stem / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nbgrader_notebook(nb, path.name), target)
        written.append(target)
    return written


def chapter_notebooks(chapters: Path) -> list[Path]:
    return sorted(p for p in chapters.glob("*.ipynb") if not p.name.startswith("."))


def write_student_notebooks(outdir: Path, chapters: Path) -> list[Path]:
    """Write the student version of every ``chapters/*.ipynb`` into ``outdir``."""
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in chapter_notebooks(chapters):
        nb = nbformat.read(path, as_version=4)
        target = outdir / path.name
        nbformat.write(student_notebook(nb, path.name), target)
        written.append(target)
    return written


# ---------------------------------------------------------------------------------
# What the generated notebooks must satisfy (used by tests and by `check`)
# ---------------------------------------------------------------------------------


def solution_cells(nb: nbformat.NotebookNode) -> dict[str, int]:
    """``{cell id: number of solution regions}`` for the code cells that hold solutions."""
    return {
        cell.id: replace_solutions(cell.source, CODE_STUB)[1]
        for cell in nb.cells
        if cell.cell_type == "code" and replace_solutions(cell.source, CODE_STUB)[1]
    }


def stub_count(source: str) -> int:
    return sum(1 for line in source.split("\n") if line.strip() == "raise NotImplementedError()")


def compare_with_chapter(
    chapter: nbformat.NotebookNode, student: nbformat.NotebookNode
) -> list[str]:
    """Problems with a student notebook: a stub must stand exactly where each solution was.

    Every code cell of the chapter appears in the student version under the same
    id, unchanged except that each solution region is now a stub; no solution
    directive or marker survives; no output is left; no glue role is left in the prose
    (with no outputs and no myst-nb, the student would see the role, not the number).
    """
    problems = []
    by_id = {cell.id: cell for cell in student.cells}
    for cell in chapter.cells:
        if cell.cell_type != "code":
            continue
        if cell.id not in by_id:
            problems.append(f"code cell {cell.id} is missing from the student version")
            continue
        theirs = by_id[cell.id].source
        expected, regions = replace_solutions(cell.source, CODE_STUB)
        if regions and theirs != expected:
            problems.append(f"cell {cell.id}: the stubs are not where the solutions were")
        if regions and stub_count(theirs) < regions:
            problems.append(
                f"cell {cell.id}: {regions} solution regions, {stub_count(theirs)} stubs"
            )
    for cell in student.cells:
        text = cell.source
        if "### BEGIN SOLUTION" in text or "### END SOLUTION" in text:
            problems.append(f"cell {cell.id}: a solution marker survived")
        for line in text.split("\n"):
            opened = FENCE_OPEN.match(line)
            if opened and opened.group("name") in SOLUTION_DIRECTIVES:
                problems.append(f"cell {cell.id}: a {opened.group('name')} directive survived")
        if cell.cell_type == "code" and (cell.outputs or cell.execution_count is not None):
            problems.append(f"cell {cell.id}: outputs were not cleared")
        if cell.cell_type == "markdown" and count_glue_roles({"cells": [cell]}):
            problems.append(f"cell {cell.id}: a glue role was not written in as its number")
    return problems


@dataclass(frozen=True)
class CheckCall:
    """A ``check_*(name, ...)`` call found in a chapter's code cell."""

    cell_id: str
    check: str
    subject: str | None  # the name passed as the first argument, if it is a plain name
    kwargs: dict


def check_calls(nb: nbformat.NotebookNode) -> list[CheckCall]:
    """Every call of a ``specdec_lib.grading`` check in the notebook's code cells."""
    names = set(CHECKS)
    calls = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(_python_only(cell.source))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if called not in names:
                continue
            subject = node.args[0].id if node.args and isinstance(node.args[0], ast.Name) else None
            kwargs = {}
            for kw in node.keywords:
                try:
                    kwargs[kw.arg] = ast.literal_eval(kw.value)
                except ValueError:
                    pass
            calls.append(CheckCall(cell.id, called, subject, kwargs))
    return calls


def _python_only(source: str) -> str:
    """Cell source without IPython magics and shell escapes, so ``ast`` can parse it."""
    return "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n")
    )


def stub_definitions(student: nbformat.NotebookNode) -> dict[str, object]:
    """The functions and classes defined in the student notebook's stub cells, ready to grade.

    Only the ``def``/``class`` statements and the imports of cells that contain a stub are
    run, with annotations left unevaluated, so nothing else in the notebook needs to run.
    """
    namespace: dict[str, object] = {}
    flags = __future__.annotations.compiler_flag
    for cell in student.cells:
        if cell.cell_type != "code" or not stub_count(cell.source):
            continue
        try:
            tree = ast.parse(_python_only(cell.source))
        except SyntaxError:
            continue
        kinds = ast.FunctionDef | ast.ClassDef | ast.Import | ast.ImportFrom
        defs = [n for n in tree.body if isinstance(n, kinds)]
        for node in defs:
            module = ast.Module(body=[node], type_ignores=[])
            try:
                exec(compile(module, f"<stub {cell.id}>", "exec", flags=flags), namespace)
            except Exception:  # a default value that needs earlier cells: cannot grade alone
                continue
    return {k: v for k, v in namespace.items() if not k.startswith("__")}


# ---------------------------------------------------------------------------------
# Exercises by number, and the written answers of a class
# ---------------------------------------------------------------------------------


def _exercise_fences(nb: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """``(label, question)`` of every exercise, in page order: the text of an
    ``{exercise}`` directive, or between ``{exercise-start}`` and ``{exercise-end}``."""
    lines = "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown").split("\n")
    found, i = [], 0
    while i < len(lines):
        opened = FENCE_OPEN.match(lines[i])
        name = opened.group("name") if opened else None
        if name not in ("exercise", "exercise-start"):
            i += 1
            continue
        label = _directive_options(lines, i).get("label", "")
        end = _directive_end(lines, i, opened.group("fence"))
        if name == "exercise":
            body = lines[i + 1 : end]
        else:
            stop = next(
                (j for j in range(end + 1, len(lines)) if "{exercise-end}" in lines[j]), end
            )
            body = lines[end + 1 : stop]
        found.append((label, _solution_text(body)))
        i = end + 1
    return found


def exercise_numbers(nb: nbformat.NotebookNode, name: str) -> dict[str, str]:
    """``{label: "Exercise 8.2"}``, numbered as the website numbers them
    (``book_numbering.py``): per chapter from 1, in page order, after the chapter's number."""
    prefix = chapter_number(Path(name).stem)
    return {
        label: f"Exercise {prefix + '.' if prefix else ''}{n}"
        for n, (label, _) in enumerate(_exercise_fences(nb), start=1)
        if label
    }


def graded_checks(chapter: nbformat.NotebookNode) -> list[CheckCall]:
    """The check calls of a chapter on the functions its exercises ask for (those defined in
    a cell with a solution), in order: what a submitted copy of it should report."""
    solved = set(solution_cells(chapter))
    exercises = set()
    for cell in chapter.cells:
        if cell.id in solved:
            tree = ast.parse(_python_only(cell.source))
            exercises |= {
                n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)
            }
    return [call for call in check_calls(chapter) if call.subject in exercises]


ANSWER_FIELDS = ["student", "notebook", "exercise", "number", "answered", "answer"]


def student_of(path: Path, root: Path) -> str:
    """The first folder under ``root``, or the file name for a flat folder."""
    rel = path.relative_to(root)
    return rel.parts[0] if len(rel.parts) > 1 else path.stem


def submitted_notebooks(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def _expected_answers(name: str, chapters: Path) -> dict[str, str]:
    """``{label: model answer}`` of the written answers of chapter ``name`` (empty if there
    is no such chapter)."""
    path = chapters / name
    if not path.exists():
        return {}
    source = student_notebook(nbformat.read(path, as_version=4), name, keep_solutions=True)
    return {c.metadata[ANSWER_KEY]: c.source for c in source.cells if ANSWER_KEY in c.metadata}


def collect_answers(submissions: Path, chapters: Path) -> tuple[list[dict], dict]:
    """One row per student and written question of every submitted notebook: the text of
    its answer cell (the ``YOUR ANSWER HERE`` cell, found by its metadata or its id), and
    ``{notebook name: {label: (number, question, model answer)}}`` for a report."""
    rows, questions, models = [], {}, {}
    for path in submitted_notebooks(submissions):
        nb = nbformat.read(path, as_version=4)
        if path.name not in models:
            models[path.name] = _expected_answers(path.name, chapters)
        found = {c.metadata[ANSWER_KEY]: c for c in nb.cells if ANSWER_KEY in c.metadata}
        by_id = {c.get("id"): c for c in nb.cells if c.cell_type == "markdown"}
        labels = list(models[path.name]) or list(found)
        numbers = exercise_numbers(nb, path.name)
        texts = dict(_exercise_fences(nb))
        questions.setdefault(path.name, {})
        for label in labels:
            cell = found.get(label) or by_id.get(answer_cell_id(label))
            text = cell.source.strip() if cell is not None else ""
            answered = bool(text) and text != MARKDOWN_STUB
            rows.append(
                {
                    "student": student_of(path, submissions),
                    "notebook": str(path.relative_to(submissions)),
                    "exercise": label,
                    "number": numbers.get(label, ""),
                    "answered": answered,
                    "answer": text
                    if answered
                    else ("" if cell is not None else "(no answer cell)"),
                }
            )
            question = (
                numbers.get(label, ""),
                texts.get(label, ""),
                models[path.name].get(label, ""),
            )
            questions[path.name].setdefault(label, question)
    return rows, questions


def write_answers(rows: list[dict], questions: dict, out: Path) -> None:
    """The answers as a CSV (one row per student and question), or, for a ``.md`` file,
    as Markdown grouped by question: the question, the model answer, each student's."""
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix.lower() != ".md":
        with out.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=ANSWER_FIELDS)
            writer.writeheader()
            writer.writerows(rows)
        return
    parts = ["# Written answers\n"]
    for name, labels in questions.items():
        for label, (number, question, model) in labels.items():
            parts.append(f"## {name}: {number or label} (`{label}`)\n\n{question.strip()}\n")
            if model:
                parts.append(f"**Model answer.**\n\n{model.strip()}\n")
            for row in rows:
                if row["exercise"] == label and Path(row["notebook"]).name == name:
                    answer = (
                        row["answer"] if row["answered"] else f"*{row['answer'] or 'no answer'}*"
                    )
                    parts.append(f"### {row['student']}\n\n{answer}\n")
    out.write_text("\n".join(parts), encoding="utf-8")
