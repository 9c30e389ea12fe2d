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
* outputs and execution counts are cleared.
"""

from __future__ import annotations
import __future__

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from specdec_lib.grading import CHECKS

BEGIN = re.compile(r"^(?P<indent>[ \t]*)### BEGIN SOLUTION[ \t]*$")
END = re.compile(r"^[ \t]*### END SOLUTION[ \t]*$")
CODE_STUB = "{indent}# YOUR CODE HERE\n{indent}raise NotImplementedError()"
MARKDOWN_STUB = "YOUR ANSWER HERE"
# A MyST directive fence: three or more backticks or colons, then {name}.
FENCE_OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}|:{3,})\{(?P<name>[\w-]+)\}")
SOLUTION_DIRECTIVES = {"solution", "solution-start", "solution-end"}
NOTE_ID = "student-version-note"
NOTE = (
    "**Student version.** Generated from the course's chapter by "
    "`python scripts/coursework.py student`; do not edit it by hand. Write your code "
    "where a cell says `# YOUR CODE HERE` (delete the `raise NotImplementedError()` line), "
    "and your answers where it says `YOUR ANSWER HERE`. Cells that call a `check_…` "
    "function tell you whether your code is right and, if not, what is wrong."
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
    """State carried across cells: are we between a solution-start and a solution-end?"""

    inside: bool = False
    removed_markdown: int = 0


def _strip_markdown(source: str, state: _Solutions, where: str) -> str:
    lines = source.split("\n")
    kept: list[str] = []
    i = 0
    while i < len(lines):
        opened = FENCE_OPEN.match(lines[i])
        name = opened.group("name") if opened else None
        if name in SOLUTION_DIRECTIVES:
            end = _directive_end(lines, i, opened.group("fence"))
            if name == "solution-start":
                if state.inside:
                    raise ValueError(f"{where}: solution-start inside another solution")
                state.inside = True
            elif name == "solution-end":
                if not state.inside:
                    raise ValueError(f"{where}: solution-end without solution-start")
                state.inside = False
            i = end + 1
            continue
        if not state.inside:
            kept.append(lines[i])
        i += 1
    return "\n".join(kept).strip("\n")


def student_notebook(nb: nbformat.NotebookNode, name: str = "notebook") -> nbformat.NotebookNode:
    """The student version of a chapter notebook (a new object; ``nb`` is not modified)."""
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    state = _Solutions()
    cells = []
    for index, cell in enumerate(nb.cells):
        where = f"{name}, cell {index}"
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            source, regions = replace_solutions(cell.source, CODE_STUB, where)
            if state.inside and not regions and source.strip():
                # A solution cell without markers: all of it is the solution.
                source, regions = CODE_STUB.format(indent=""), 1
            cell.source = source
            cells.append(cell)
        elif cell.cell_type == "markdown":
            source, _ = replace_solutions(cell.source, MARKDOWN_STUB, where)
            source = _strip_markdown(source, state, where)
            if source.strip():
                cell.source = source
                cells.append(cell)
            else:
                state.removed_markdown += 1
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
    directive or marker survives; no output is left.
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

    Only the ``def``/``class`` statements of cells that contain a stub are run, with
    annotations left unevaluated, so nothing else in the notebook needs to run.
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
        defs = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
        for node in defs:
            module = ast.Module(body=[node], type_ignores=[])
            try:
                exec(compile(module, f"<stub {cell.id}>", "exec", flags=flags), namespace)
            except Exception:  # a default value that needs earlier cells: cannot grade alone
                continue
    return {k: v for k, v in namespace.items() if not k.startswith("__")}
