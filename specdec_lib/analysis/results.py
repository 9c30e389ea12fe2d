"""Stored benchmark results, shipped with the library.

A measurement too slow for a one-minute chapter is made by a script in the course
repository's ``benchmarks/`` and stored as JSON in the library's package data,
``specdec_lib/results/<name>.json``; the chapter plots the file and says so. Because
the files ship inside the package, a chapter finds them wherever it runs: in a clone,
in a hand-out folder with only ``pip install`` of the library, in Binder or Colab.
They are read through :mod:`importlib.resources`. Nothing is fetched from the network.

Every script that writes a result writes it to :data:`RESULTS_DIR` (a real folder of
the checkout when the library is installed editable, ``pip install -e .``), so a re-run
benchmark replaces the file the chapters read.
"""

from __future__ import annotations

import difflib
import json
import re
from importlib import resources
from pathlib import Path

#: Where the stored results live on disk: ``specdec_lib/results/`` of this installation.
#: Benchmarks write here; with an editable install that is the repository's folder.
RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"

# The suffixes a second or third run of the same benchmark is stored under
# (``--out``), longest first, for a result that records no command (or is missing), and
# the results no ``benchmarks/<name>.py`` writes.
_RUN_SUFFIXES = ("_copy_rerun", "_edit_rerun", "_rerun", "_run3", "_copy", "_edit")
_WRITERS = {
    "wall_clock_counts": "python benchmarks/wall_clock.py --counts-only",
    "chapter_times": "OMP_NUM_THREADS=1 python scripts/time_chapters.py",
    "eagle_training": "OMP_NUM_THREADS=1 python -m specdec_lib.engine.train_eagle",
    "training_runs": (
        "python -m specdec_lib.engine.train (each run's probe curve, recorded by hand; "
        "see the file's description)"
    ),
}


_OUT = re.compile(r"\s--out(?:=|\s+)\S+")
_SCRIPT = re.compile(r"\bbenchmarks/(\w+)\.py\b")


def _recorded_command(name: str) -> str | None:
    """The command line the stored result ``name`` records (its ``command``), if any."""
    resource = resources.files("specdec_lib") / "results" / f"{name}.json"
    try:
        command = json.loads(resource.read_text(encoding="utf-8")).get("command")
    except (OSError, ValueError, AttributeError):
        return None
    return command.strip() if isinstance(command, str) and _SCRIPT.search(command) else None


def writer(name: str) -> str:
    """The command in the course repository that writes the stored result ``name``: the
    command line the file records (every benchmark stores its own), its ``--out`` pointed
    at ``specdec_lib/results/<name>.json`` when that is not the script's own file; for a
    file that records none, or is missing, a guess from its name (``trees_rerun``: the
    ``trees.py`` benchmark with ``--out``)."""
    if name in _WRITERS:
        return _WRITERS[name]
    recorded = _recorded_command(name)
    if recorded is not None:
        command = _OUT.sub("", recorded)
        own = _SCRIPT.search(command).group(1) == name
        return command + ("" if own else f" --out specdec_lib/results/{name}.json")
    base = name
    for suffix in _RUN_SUFFIXES:
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            break
    out = "" if base == name else f" --out specdec_lib/results/{name}.json"
    return f"python benchmarks/{base}.py{out}"


def load_result(name: str) -> dict:
    """The stored benchmark result ``specdec_lib/results/<name>.json``.

    Raises ``FileNotFoundError`` if the library has no such file and ``ValueError`` if
    the file is not valid JSON; both messages name the file and the script that writes it.
    """
    resource = resources.files("specdec_lib") / "results" / f"{name}.json"
    how = (
        f"it is written by `{writer(name)}`, run from a clone of the course repository "
        "with the library installed editable (`pip install -e .`); or reinstall the library, "
        "whose package data carries every stored result"
    )
    if not resource.is_file():
        stored = resources.files("specdec_lib") / "results"
        names = (
            [p.name[:-5] for p in stored.iterdir() if p.name.endswith(".json")]
            if stored.is_dir()
            else []
        )
        close = difflib.get_close_matches(name, names, n=3)
        hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
        raise FileNotFoundError(
            f"stored result {name!r} not found: {resource} does not exist{hint}; {how}"
        )
    text = resource.read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"stored result {name!r} is not valid JSON ({resource}: {exc}); {how}"
        ) from exc
