"""Re-execute chapter notebooks in place, top to bottom, each in a fresh kernel.

    python scripts/execute_notebooks.py                  # every notebook in chapters/
    python scripts/execute_notebooks.py chapters/00_a_first_look.ipynb

This is how a chapter's stored outputs are made. The website shows those
outputs (nothing runs at build time) and ``pytest`` re-executes each notebook
with strict nbval and compares its outputs with them, so run this after
changing a chapter or the library, then commit the notebooks.

Each notebook runs with kernelspec ``python3`` from the Python running this
script, its own folder as working directory, widget state stored (so widgets
render on the site), and no per-cell timing metadata (which would change on
every run and bury real changes in the diff). A notebook that raises is left
untouched on disk and the script exits non-zero.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "chapters"
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def execute_copy(path: Path, timeout: int = 600) -> nbformat.NotebookNode:
    """Execute the notebook at ``path`` from its own folder; return it, leaving the file alone."""
    nb = nbformat.read(path, as_version=4)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata.pop("widgets", None)  # stale widget state from an earlier run
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=True,
        record_timing=False,
    )
    client.execute()
    # An exception raised while displaying a result (a broken figure, say) does
    # not fail the cell's execution; it only leaves an error output. Catch it here.
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                raise CellExecutionError(
                    f"cell {index} left an error output: {output.get('ename')}: "
                    f"{output.get('evalue')}",
                    output.get("ename", ""),
                    output.get("evalue", ""),
                )
    nbformat.validate(nb)
    return nb


def execute(path: Path, timeout: int) -> float:
    """Execute one notebook in place; return its wall time in seconds."""
    start = time.perf_counter()
    nb = execute_copy(path, timeout)
    elapsed = time.perf_counter() - start
    nbformat.write(nb, path)
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks (default: chapters/*.ipynb)")
    parser.add_argument("--timeout", type=int, default=600, help="per-cell timeout in seconds")
    args = parser.parse_args(argv)

    # Kernelspec "python3" launches `python` from PATH: make that this interpreter.
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    paths = args.paths or sorted(CHAPTERS.glob("*.ipynb"))
    if not paths:
        print("no notebooks to execute", file=sys.stderr)
        return 1
    failed = []
    for path in paths:
        print(f"executing {path} ...", flush=True)
        try:
            elapsed = execute(path.resolve(), args.timeout)
        except CellExecutionError as exc:
            print(f"FAILED {path} (left unchanged):\n{exc}", file=sys.stderr)
            failed.append(path)
            continue
        print(f"  done in {elapsed:.1f} s", flush=True)
    if failed:
        print(f"{len(failed)} notebook(s) failed: {', '.join(map(str, failed))}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
