"""Time every chapter notebook on this machine: wall seconds and the kernel's peak memory.

    OMP_NUM_THREADS=1 python scripts/time_chapters.py        # every notebook in _toc.yml
    OMP_NUM_THREADS=1 python scripts/time_chapters.py chapters/03_ngram_drafter.ipynb

Each notebook runs top to bottom in a fresh ``python3`` kernel, from ``chapters/`` (as
``scripts/execute_notebooks.py`` runs it), on an in-memory copy: the stored notebooks
are never written. Per notebook it records

* ``seconds``: wall time from the first cell starting to the last cell finishing
  (kernel start-up excluded, and recorded apart as ``startup_seconds``);
* ``peak_rss_mb``: the kernel process's peak resident memory, its ``VmHWM`` in
  ``/proc/<pid>/status`` read after the last cell (Linux only; ``null`` elsewhere);
* ``load_average``: the machine's 1-minute load average just before the notebook ran,
  because on a shared machine another job's load slows a notebook down.

The results, with a machine stamp (CPU, cores, Python and PyTorch versions), go to
``specdec_lib/results/chapter_times.json``; the teachers' page reads that file when the
site is built (``scripts/book_chapter_times.py``), and ``tests/test_book.py`` fails if a
notebook in the table of contents has no time there. Naming notebooks re-times only
those and keeps the other entries, provided the machine stamp is unchanged.

``OMP_NUM_THREADS`` defaults to 1 here (the kernels inherit it): the course promises one
core per notebook. Times are single runs, not medians: they say how long a reader waits.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch is imported, here and in kernels

import book_toc  # noqa: E402  (scripts/, beside this file)
import nbformat  # noqa: E402
from nbclient import NotebookClient  # noqa: E402
from nbclient.exceptions import CellExecutionError  # noqa: E402

from specdec_lib.analysis.provenance import machine_stamp  # noqa: E402
from specdec_lib.analysis.results import RESULTS_DIR  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "chapters"
RESULTS = RESULTS_DIR / "chapter_times.json"


def toc_notebooks(root: Path = ROOT) -> list[Path]:
    """The notebooks listed in ``_toc.yml``, in reading order (Markdown pages left out)."""
    return book_toc.toc_notebooks(root)


def peak_rss_mb(pid: int) -> float | None:
    """Peak resident set size of a live process, in MB (VmHWM), or None off Linux."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # reported in kB
    return None


def time_notebook(path: Path, timeout: int) -> dict:
    """Run one notebook (an in-memory copy) in a fresh kernel; return its measurements."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.reset_execution_trackers()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    start = time.perf_counter()
    with client.setup_kernel():
        started = time.perf_counter()
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        seconds = time.perf_counter() - started
        peak = peak_rss_mb(client.km.provisioner.pid)
    for index, cell in enumerate(nb.cells):  # an error while displaying a result
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                raise CellExecutionError(
                    f"cell {index}: {output.get('ename')}: {output.get('evalue')}",
                    output.get("ename", ""),
                    output.get("evalue", ""),
                )
    return {
        "measured": datetime.now(UTC).strftime("%Y-%m-%d"),
        "commit": commit(),
        "seconds": round(seconds, 2),
        "startup_seconds": round(started - start, 2),
        "peak_rss_mb": None if peak is None else round(peak, 1),
        "load_average": None if load is None else round(load, 2),
    }


def commit() -> str:
    """The commit measured, marked when the chapters or the library had local changes."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "chapters", "specdec_lib")
    return f"{head} (with local changes)" if dirty else head


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks (default: all in _toc.yml)")
    parser.add_argument("--timeout", type=int, default=600, help="per-cell timeout in seconds")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    # Kernelspec "python3" launches `python` from PATH: make that this interpreter.
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    machine = {**machine_stamp(), "omp_num_threads": os.environ["OMP_NUM_THREADS"]}
    paths = [p.resolve() for p in args.paths] or toc_notebooks()

    results = {"notebooks": {}}
    if args.paths and args.out.is_file():
        results = json.loads(args.out.read_text(encoding="utf-8"))
        if results.get("machine") != machine:
            print(
                f"{args.out} was measured on another machine or set-up; time every "
                "notebook (no arguments) rather than mixing machines",
                file=sys.stderr,
            )
            return 1

    failed = []
    for path in paths:
        print(f"timing {path.relative_to(ROOT)} ...", flush=True)
        try:
            entry = time_notebook(path, args.timeout)
        except CellExecutionError as exc:
            print(f"FAILED {path.name}:\n{exc}", file=sys.stderr)
            failed.append(path.name)
            continue
        results["notebooks"][path.name] = entry
        print(
            f"  {entry['seconds']:.1f} s, peak {entry['peak_rss_mb']} MB "
            f"(start-up {entry['startup_seconds']:.1f} s, load {entry['load_average']})",
            flush=True,
        )

    order = [p.name for p in toc_notebooks()]
    notebooks = results["notebooks"]
    results = {
        "machine": machine,
        "command": f"OMP_NUM_THREADS={machine['omp_num_threads']} python scripts/time_chapters.py",
        "what": {
            "measured": "date of the run (UTC)",
            "commit": "the commit measured, and whether chapters/ or specdec_lib/ had changes",
            "seconds": "wall time of all cells, one run, fresh kernel, kernel start-up excluded",
            "startup_seconds": "wall time to start the kernel",
            "peak_rss_mb": "peak resident memory of the kernel process (VmHWM), in MB",
            "load_average": "1-minute load average of the machine before the notebook ran",
        },
        "notebooks": {
            name: notebooks[name]
            for name in sorted(notebooks, key=lambda n: order.index(n) if n in order else 999)
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    if failed:
        print(f"{len(failed)} notebook(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
