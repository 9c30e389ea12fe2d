"""Committed benchmark results, found from wherever the chapter runs.

A measurement too slow for a one-minute chapter is made by a script in
``benchmarks/`` and committed as JSON under ``benchmarks/results/``; the chapter
plots the file and says so. The file is looked for in the working directory and its
parents (a chapter runs from ``chapters/`` of a clone; in Colab the set-up cell clones
the repository and moves there). Nothing is fetched from the network.
"""

from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path("benchmarks") / "results"


def _candidates(name: str) -> list[Path]:
    here = Path.cwd().resolve()
    return [root / RESULTS / f"{name}.json" for root in (here, *here.parents)]


def load_result(name: str) -> dict:
    """The committed benchmark result ``benchmarks/results/<name>.json``."""
    for path in _candidates(name):
        if path.is_file():
            return json.loads(path.read_text())
    raise FileNotFoundError(
        f"benchmarks/results/{name}.json not found in {Path.cwd()} or its parents: run the "
        "chapter from a clone of the course repository (or the script in benchmarks/ that "
        "writes the file)"
    )


def save_result(path: Path, result: dict, strict: bool = False) -> None:
    """Write a benchmark's ``result`` as JSON, with a warning if ``result["load"]`` says
    the machine was busy; with ``strict``, refuse (``SystemExit``) instead of writing."""
    load = result.get("load", {})
    if load.get("busy"):
        print(f"WARNING: the machine was busy during the run: {load}")
        if strict:
            raise SystemExit(f"--strict: {path} not written")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")
