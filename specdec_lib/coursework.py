"""Coursework: student notebooks generated from the chapters, and bulk grading.

    python -m specdec_lib.coursework student OUTDIR   # write the student notebooks
    python -m specdec_lib.coursework check            # they run, raising only NotImplementedError
    python -m specdec_lib.coursework grade SUBMISSIONS --csv grades.csv

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

Grading runs each submitted notebook top to bottom in a fresh kernel with
``SPECDEC_GRADING_LOG`` set, so every ``check_*`` call in it appends its report
to a log (see :mod:`specdec_lib.grading`); the reports become rows of a CSV.
This executes student code: do it in a container or on a JupyterHub account
with nothing to lose, as nbgrader does.
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from .grading import LOG_ENV

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "chapters"

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
    "`python -m specdec_lib.coursework student`; do not edit it by hand. Write your code "
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


def chapter_notebooks(chapters: Path = CHAPTERS) -> list[Path]:
    return sorted(p for p in chapters.glob("*.ipynb") if not p.name.startswith("."))


def write_student_notebooks(outdir: Path, chapters: Path = CHAPTERS) -> list[Path]:
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
    from . import grading

    names = {n for n in grading.__all__ if n.startswith("check_")}
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
    flags = __import__("__future__").annotations.compiler_flag
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


# ---------------------------------------------------------------------------------
# Executing notebooks
# ---------------------------------------------------------------------------------


@dataclass
class Execution:
    """What happened when a notebook ran: the errors cells raised and the reports checks made."""

    path: Path
    errors: list[dict] = field(default_factory=list)  # {cell, ename, evalue}
    reports: list[dict] = field(default_factory=list)  # Report.as_dict() + cell + exercise
    failure: str = ""  # the run itself failed (kernel died, a cell timed out)
    seconds: float = 0.0


def _exercise_labels(nb: nbformat.NotebookNode) -> list[str]:
    """For each cell, the label of the latest exercise opened at or before it ("" if none)."""
    labels, current = [], ""
    for cell in nb.cells:
        if cell.cell_type == "markdown" and "{exercise" in cell.source:
            found = re.findall(r":label:\s*(\S+)", cell.source)
            if found:
                current = found[-1]
        labels.append(current)
    return labels


def execute_notebook(path: Path, cwd: Path | None = None, timeout: int = 600) -> Execution:
    """Run a notebook in a fresh kernel, errors allowed, collecting errors and check reports."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    result = Execution(path)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "reports.jsonl"
        previous = os.environ.get(LOG_ENV)
        os.environ[LOG_ENV] = str(log)  # the kernel inherits it
        client = NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            allow_errors=True,
            record_timing=False,
            resources={"metadata": {"path": str(cwd or path.parent)}},
        )
        start = time.perf_counter()
        try:
            client.execute()
        except Exception as exc:  # a cell timed out or the kernel died
            result.failure = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300]}"
        finally:
            result.seconds = time.perf_counter() - start
            if previous is None:
                os.environ.pop(LOG_ENV, None)
            else:
                os.environ[LOG_ENV] = previous
        entries = (
            [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        )
    by_count = {
        cell.get("execution_count"): index
        for index, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and cell.get("execution_count") is not None
    }
    labels = _exercise_labels(nb)
    for entry in entries:
        index = by_count.get(entry.pop("execution_count", None))
        entry["cell"] = index
        entry["exercise"] = labels[index] if index is not None else ""
        result.reports.append(entry)
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                result.errors.append(
                    {"cell": index, "ename": output.get("ename"), "evalue": output.get("evalue")}
                )
    return result


def _execute_all(
    jobs: list[tuple[Path, Path | None]], timeout: int, workers: int
) -> Iterator[Execution]:
    """Execute notebooks, yielding each result as soon as it is ready (in job order)."""
    if workers <= 1:
        for path, cwd in jobs:
            yield execute_notebook(path, cwd, timeout)
        return
    with ProcessPoolExecutor(workers) as pool:
        futures = [pool.submit(execute_notebook, path, cwd, timeout) for path, cwd in jobs]
        for future in futures:
            yield future.result()


# ---------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------


def check_student_notebooks(
    chapters: Path = CHAPTERS, keep: Path | None = None, timeout: int = 600, workers: int = 1
) -> list[str]:
    """Generate the student notebooks, run them, and list every problem found.

    A student notebook must run top to bottom raising nothing but
    ``NotImplementedError`` (from the stubs), and every check it calls on a stub
    must fail with "not implemented yet". Notebooks run with the chapters folder as
    working directory, like the nbval run.
    """
    with tempfile.TemporaryDirectory() as tmp:
        outdir = keep or Path(tmp)
        paths = write_student_notebooks(outdir, chapters)
        problems = []
        for path in paths:
            chapter = nbformat.read(chapters / path.name, as_version=4)
            student = nbformat.read(path, as_version=4)
            problems += [f"{path.name}: {p}" for p in compare_with_chapter(chapter, student)]
        for run in _execute_all([(p, chapters) for p in paths], timeout, workers):
            problems += _student_run_problems(run)
    return problems


def _student_run_problems(run: Execution) -> list[str]:
    """What is wrong with one executed student notebook (and a one-line progress report)."""
    problems = []
    name = run.path.name
    if run.failure:
        problems.append(f"{name}: did not run to the end: {run.failure}")
    for error in run.errors:
        if error["ename"] != "NotImplementedError":
            problems.append(
                f"{name}, cell {error['cell']}: raised {error['ename']}: {error['evalue']}"
            )
    for report in run.reports:
        if report["passed"] or report["diagnosis"] != "not_implemented":
            problems.append(
                f"{name}, cell {report['cell']}: {report['check']}({report['subject']}) "
                f"gave '{report['diagnosis'] or 'passed'}' on the student version, "
                "expected 'not_implemented'"
            )
    stubs = sum(e["ename"] == "NotImplementedError" for e in run.errors)
    print(
        f"{name}: {run.seconds:.1f} s, {stubs} cells stopped at a stub, "
        f"{len(run.reports)} checks reported",
        flush=True,
    )
    return problems


CSV_FIELDS = [
    "student",
    "notebook",
    "exercise",
    "check",
    "subject",
    "passed",
    "diagnosis",
    "message",
]


def _student_of(path: Path, root: Path) -> str:
    rel = path.relative_to(root)
    return rel.parts[0] if len(rel.parts) > 1 else path.stem


def grade_submissions(
    submissions: Path, csv_path: Path, timeout: int = 600, workers: int = 1
) -> list[dict]:
    """Run every submitted notebook under ``submissions`` and write one CSV row per check.

    The student is the first folder under ``submissions`` (``alice/03_....ipynb``, or
    nbgrader's ``submitted/alice/<assignment>/...`` when given ``submitted``), or the
    file name for a flat folder. A notebook that raised something other than
    ``NotImplementedError``, or did not run to the end, also gets a row
    (check ``(notebook)``) so it is not silently missing.
    """
    paths = sorted(p for p in submissions.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    runs = _execute_all([(p, None) for p in paths], timeout, workers)
    rows = []
    for run in runs:
        base = {
            "student": _student_of(run.path, submissions),
            "notebook": str(run.path.relative_to(submissions)),
        }
        for report in run.reports:
            rows.append(
                {
                    **base,
                    "exercise": report["exercise"],
                    "check": report["check"],
                    "subject": report["subject"],
                    "passed": report["passed"],
                    "diagnosis": report["diagnosis"],
                    "message": report["message"],
                }
            )
        problems = [e for e in run.errors if e["ename"] != "NotImplementedError"]
        if run.failure or problems:
            what = run.failure or "; ".join(
                f"cell {e['cell']} raised {e['ename']}: {e['evalue']}" for e in problems[:3]
            )
            rows.append(
                {
                    **base,
                    "exercise": "",
                    "check": "(notebook)",
                    "subject": "",
                    "passed": False,
                    "diagnosis": "notebook_error",
                    "message": what,
                }
            )
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with csv_path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m specdec_lib.coursework",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    student = sub.add_parser("student", help="write student notebooks (solutions removed)")
    student.add_argument("outdir", type=Path)
    student.add_argument("--chapters", type=Path, default=CHAPTERS)
    check = sub.add_parser("check", help="generate and run the student notebooks")
    check.add_argument("--chapters", type=Path, default=CHAPTERS)
    check.add_argument("--keep", type=Path, default=None, help="write them here, not a temp dir")
    check.add_argument("--timeout", type=int, default=600, help="per cell, seconds")
    check.add_argument("--jobs", type=int, default=1, help="notebooks run in parallel")
    grade = sub.add_parser("grade", help="run submitted notebooks, write a CSV of check results")
    grade.add_argument("submissions", type=Path)
    grade.add_argument("--csv", type=Path, required=True)
    grade.add_argument("--timeout", type=int, default=600, help="per cell, seconds")
    grade.add_argument("--jobs", type=int, default=1, help="notebooks run in parallel")
    args = parser.parse_args(argv)

    if args.command == "student":
        for path in write_student_notebooks(args.outdir, args.chapters):
            print(path)
        return 0
    if args.command == "check":
        problems = check_student_notebooks(args.chapters, args.keep, args.timeout, args.jobs)
        for problem in problems:
            print(f"PROBLEM {problem}")
        print("student notebooks: OK" if not problems else f"{len(problems)} problems")
        return 1 if problems else 0
    rows = grade_submissions(args.submissions, args.csv, args.timeout, args.jobs)
    totals: dict[str, list[int]] = {}
    for row in rows:
        if row["check"] != "(notebook)":
            total = totals.setdefault(row["student"], [0, 0])
            total[0] += bool(row["passed"])
            total[1] += 1
    for name, (passed, count) in sorted(totals.items()):
        print(f"{name}: {passed}/{count} checks passed")
    print(f"wrote {len(rows)} rows to {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
