"""Coursework: student notebooks generated from the chapters, and bulk grading.

    python scripts/coursework.py student OUTDIR   # write the student notebooks
    python scripts/coursework.py nbgrader COURSE  # write COURSE/source/<chapter>/ for nbgrader
    python scripts/coursework.py check [NAME ...] # run outside the repository: only stubs raise
    python scripts/coursework.py grade SUBMISSIONS --csv grades.csv
    python scripts/coursework.py answers SUBMISSIONS --out answers.csv  # or answers.md

``student`` and ``check`` read the chapters next to this script (``../chapters``)
or the folder given with ``--chapters``; how a student notebook is made is in
``student_notebooks.py``. Grading runs each submitted notebook top to bottom in a
fresh kernel with ``SPECDEC_GRADING_LOG`` set, so every ``check_*`` call in it
appends its report to a log (see :mod:`specdec_lib.grading`); the reports become
rows of a CSV. This executes student code: do it in a container or on a
JupyterHub account with nothing to lose, as nbgrader does.

This is a script of the course repository, not part of the installed library:
it needs the chapters, and nbformat and nbclient, which the library does not.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from student_notebooks import (
    REPOSITORY,
    collect_answers,
    compare_with_chapter,
    exercise_numbers,
    graded_checks,
    student_of,
    submitted_notebooks,
    write_answers,
    write_nbgrader_source,
    write_student_notebooks,
)
from tqdm import tqdm

from specdec_lib.grading import LOG_ENV, Diagnosis

CHAPTERS = Path(__file__).resolve().parent.parent / "chapters"

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
            extra_arguments=["--IPKernelApp.log_level=ERROR"],  # no TCP warning per kernel
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
    chapters: Path = CHAPTERS,
    keep: Path | None = None,
    timeout: int = 600,
    workers: int = 1,
    names: list[str] | None = None,
    workdir: Path | None = None,
) -> list[str]:
    """Generate the student notebooks, run them, and list every problem found.

    A student notebook must run top to bottom raising nothing but
    ``NotImplementedError`` (from the stubs), and every check it calls on a stub
    must fail with "not implemented yet". They run as a hand-out does: copied alone
    into an empty folder outside the repository (``workdir``, or a fresh temporary
    folder), which is their working directory, so a notebook that needs anything but
    the installed library (a file of the clone, say) fails here. ``names`` (such as
    ``12_trees_and_heads``) checks only those chapters.
    """
    with (
        tempfile.TemporaryDirectory() as tmp,
        tempfile.TemporaryDirectory(prefix="specdec-handout-") as fresh,
    ):
        outdir = keep or Path(tmp)
        paths = write_student_notebooks(outdir, chapters)
        if names is not None:
            wanted = {name.removesuffix(".ipynb") for name in names}
            if unknown := wanted - {p.stem for p in paths}:
                raise ValueError(f"no chapter notebook named {sorted(unknown)} in {chapters}")
            paths = [p for p in paths if p.stem in wanted]
        problems = []
        for path in paths:
            chapter = nbformat.read(chapters / path.name, as_version=4)
            student = nbformat.read(path, as_version=4)
            problems += [f"{path.name}: {p}" for p in compare_with_chapter(chapter, student)]
        handout = handout_folder(workdir or Path(fresh))
        copies = [Path(shutil.copy2(p, handout / p.name)) for p in paths]
        print(f"running {len(copies)} student notebooks in {handout}", flush=True)
        for run in _execute_all([(p, handout) for p in copies], timeout, workers):
            problems += _student_run_problems(run)
    return problems


def handout_folder(folder: Path) -> Path:
    """``folder`` (created if missing), refused unless empty and outside the repository."""
    folder = folder.resolve()
    repository = CHAPTERS.resolve().parent
    if folder == repository or repository in folder.parents:
        raise ValueError(f"{folder} is inside the repository {repository}: a hand-out is not")
    folder.mkdir(parents=True, exist_ok=True)
    if any(folder.iterdir()):
        raise ValueError(f"{folder} is not empty: a hand-out folder holds only the notebooks")
    return folder


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
        if report["passed"] or report["diagnosis"] != Diagnosis.NOT_IMPLEMENTED.key:
            problems.append(
                f"{name}, cell {report['cell']}: {report['check']}({report['subject']}) "
                f"gave '{report['diagnosis'] or 'passed'}' on the student version, "
                f"expected '{Diagnosis.NOT_IMPLEMENTED.key}'"
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
    "number",
    "check",
    "subject",
    "passed",
    "diagnosis",
    "message",
]
NOTEBOOK_ROW = "(notebook)"


def _grade_rows(run: Execution, submissions: Path, chapters: Path) -> list[dict]:
    """The CSV rows of one executed notebook (see :func:`grade_submissions`)."""
    base = {
        "student": student_of(run.path, submissions),
        "notebook": str(run.path.relative_to(submissions)),
    }
    numbers = exercise_numbers(nbformat.read(run.path, as_version=4), run.path.name)
    library = (REPOSITORY / "specdec_lib").resolve()
    rows = []
    for report in run.reports:
        used = report.get("library")
        if used and Path(used).resolve() != library:
            raise SystemExit(
                f"{run.path}: its checks ran with the library in {used}, not with this "
                f"checkout's ({library}), so they may not be the checks of these chapters. "
                "Grade from the checkout whose chapters the students had, with nothing "
                "in the notebook changing sys.path."
            )
        rows.append(
            {
                **base,
                "exercise": report["exercise"],
                "number": numbers.get(report["exercise"], ""),
                "check": report["check"],
                "subject": report["subject"],
                "passed": report["passed"],
                "diagnosis": report["diagnosis"],
                "message": report["message"],
            }
        )
    chapter_path = chapters / run.path.name
    if chapter_path.exists():  # the chapter's checks that never reported
        chapter = nbformat.read(chapter_path, as_version=4)
        labels = dict(zip((c.id for c in chapter.cells), _exercise_labels(chapter), strict=True))
        reported = {report["check"] for report in run.reports}
        for call in graded_checks(chapter):
            if call.check in reported:
                continue
            label = labels.get(call.cell_id, "")
            message = (
                f"{Diagnosis.NOT_RUN.advice} {call.check}({call.subject}) reported nothing: "
                "its cell was removed, or the run stopped before it."
            )
            rows.append(
                {
                    **base,
                    "exercise": label,
                    "number": numbers.get(label, ""),
                    "check": call.check,
                    "subject": call.subject,
                    "passed": False,
                    "diagnosis": Diagnosis.NOT_RUN.key,
                    "message": message,
                }
            )
    # A failed check raises in its own cell (raise_if_failed), and a stub raises
    # NotImplementedError: both are already in the rows above.
    reported_cells = {report["cell"] for report in run.reports if not report["passed"]}
    problems = [
        e
        for e in run.errors
        if e["ename"] != "NotImplementedError" and e["cell"] not in reported_cells
    ]
    if run.failure or problems:
        what = run.failure or "; ".join(
            f"cell {e['cell']} raised {e['ename']}: {e['evalue']}" for e in problems[:3]
        )
        rows.append(
            {
                **base,
                "exercise": "",
                "number": "",
                "check": NOTEBOOK_ROW,
                "subject": "",
                "passed": False,
                "diagnosis": Diagnosis.NOTEBOOK_ERROR.key,
                "message": what,
            }
        )
    return rows


def grade_submissions(
    submissions: Path,
    csv_path: Path,
    timeout: int = 600,
    workers: int = 1,
    chapters: Path = CHAPTERS,
) -> list[dict]:
    """Run every submitted notebook under ``submissions`` and write one CSV row per check.

    The student is the first folder under ``submissions`` (``alice/03_....ipynb``, or
    nbgrader's ``submitted/alice/<assignment>/...`` when given ``submitted``), or the
    file name for a flat folder. Each check a notebook ran gives a row, with its
    exercise's label and its number on the website ("Exercise 8.2"); each check of the
    chapter of the same name (in ``chapters``) that never reported gives a failing row
    with diagnosis ``not_run``, so an unattempted or deleted exercise still counts as not
    passed; and a notebook with an error no check reported (a cell that raised anything
    but a stub's ``NotImplementedError`` outside a failed check's own cell, a kernel that
    died, a cell over the time limit) gets one more row, check ``(notebook)``.

    The kernels import this checkout's library (its folder first on ``PYTHONPATH``); a
    check that reports from another copy stops the grading.
    """
    paths = submitted_notebooks(submissions)
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPOSITORY), previous]))
    rows: list[dict] = []
    try:
        runs = _execute_all([(p, None) for p in paths], timeout, workers)
        with tqdm(total=len(paths), desc="grading", unit="notebook") as progress:
            for run in runs:
                rows += _grade_rows(run, submissions, chapters)
                progress.set_postfix_str(f"{run.path.relative_to(submissions)}", refresh=False)
                progress.update()
    finally:
        if previous is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = previous
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with csv_path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python scripts/coursework.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    student = sub.add_parser("student", help="write student notebooks (solutions removed)")
    student.add_argument("outdir", type=Path)
    student.add_argument("--chapters", type=Path, default=CHAPTERS)
    source = sub.add_parser("nbgrader", help="write nbgrader source notebooks (one per chapter)")
    source.add_argument("course", type=Path, help="the nbgrader course folder")
    source.add_argument("--chapters", type=Path, default=CHAPTERS)
    check = sub.add_parser("check", help="generate and run the student notebooks")
    check.add_argument("--chapters", type=Path, default=CHAPTERS)
    check.add_argument("--keep", type=Path, default=None, help="write them here, not a temp dir")
    check.add_argument("--timeout", type=int, default=600, help="per cell, seconds")
    check.add_argument("--jobs", type=int, default=1, help="notebooks run in parallel")
    check.add_argument("names", nargs="*", help="only these chapters (e.g. 12_trees_and_heads)")
    check.add_argument(
        "--workdir", type=Path, default=None, help="empty folder outside the repository to run in"
    )
    grade = sub.add_parser("grade", help="run submitted notebooks, write a CSV of check results")
    grade.add_argument("submissions", type=Path)
    grade.add_argument("--csv", type=Path, required=True)
    grade.add_argument("--timeout", type=int, default=600, help="per cell, seconds")
    grade.add_argument("--jobs", type=int, default=1, help="notebooks run in parallel")
    grade.add_argument("--chapters", type=Path, default=CHAPTERS)
    answers = sub.add_parser("answers", help="collect the written answers of submitted notebooks")
    answers.add_argument("submissions", type=Path)
    answers.add_argument(
        "--out", type=Path, required=True, help="a .csv file, or .md for a report by question"
    )
    answers.add_argument("--chapters", type=Path, default=CHAPTERS)
    args = parser.parse_args(argv)

    if args.command == "student":
        for path in write_student_notebooks(args.outdir, args.chapters):
            print(path)
        return 0
    if args.command == "nbgrader":
        for path in write_nbgrader_source(args.course, args.chapters):
            print(path)
        return 0
    if args.command == "check":
        problems = check_student_notebooks(
            args.chapters, args.keep, args.timeout, args.jobs, args.names or None, args.workdir
        )
        for problem in problems:
            print(f"PROBLEM {problem}")
        print("student notebooks: OK" if not problems else f"{len(problems)} problems")
        return 1 if problems else 0
    if args.command == "answers":
        found, questions = collect_answers(args.submissions, args.chapters)
        write_answers(found, questions, args.out)
        written = sum(row["answered"] for row in found)
        print(f"wrote {len(found)} rows ({written} answered) to {args.out}")
        return 0
    start = time.perf_counter()
    rows = grade_submissions(args.submissions, args.csv, args.timeout, args.jobs, args.chapters)
    totals: dict[str, list[int]] = {}
    for row in rows:
        total = totals.setdefault(row["student"], [0, 0, 0])
        if row["check"] == NOTEBOOK_ROW:
            total[2] += 1
        else:
            total[0] += row["passed"] is True
            total[1] += 1
    for name, (passed, count, errors) in sorted(totals.items()):
        extra = f", {errors} notebook{'s' if errors > 1 else ''} with an error" if errors else ""
        print(f"{name}: {passed}/{count} checks passed{extra}")
    seconds = time.perf_counter() - start
    print(f"wrote {len(rows)} rows to {args.csv} ({seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
