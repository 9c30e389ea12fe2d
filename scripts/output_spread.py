"""Which compared outputs of a chapter move between CPU kernels and thread counts.

    python scripts/output_spread.py chapters/07_negative_control.ipynb
    python scripts/output_spread.py --settings default,avx2 chapters/06_residual_rule.ipynb

Float32 results depend on the CPU's vector kernels and on the thread count, so a
number printed to more digits than its claim needs passes on the machine that
stored it and fails on a student's. This script executes each notebook once per
setting (a fresh kernel under ``ATEN_CPU_CAPABILITY`` and ``OMP_NUM_THREADS``),
into a temporary copy (the stored notebook is not touched), and prints every
output that nbval would compare and that differs from the stored one, line by
line. Use it to choose how many digits a number is printed with: the digits that
never move across the settings.

Settings: ``plain`` (this machine's defaults), ``default`` (torch's
non-vectorised kernels), ``avx2``, ``1thread``, ``2threads``.
"""

from __future__ import annotations

import argparse
import configparser
import difflib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = {
    "plain": {},
    "default": {"ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "1"},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": "1"},
    "1thread": {"OMP_NUM_THREADS": "1"},
    "2threads": {"OMP_NUM_THREADS": "2"},
}
COMPARED = ("text/plain", "text/markdown", "text/html", "text/latex")


def _sanitizers() -> list[tuple[re.Pattern[str], str]]:
    """The regexes nbval applies to both sides (tests/nbval_sanitize.cfg)."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(ROOT / "tests" / "nbval_sanitize.cfg")
    return [(re.compile(parser[s]["regex"]), parser[s]["replace"]) for s in parser.sections()]


def compared_text(cell: nbformat.NotebookNode, sanitizers: list) -> list[str]:
    """The lines of a code cell's outputs that strict nbval compares."""
    if cell.cell_type != "code" or "NBVAL_IGNORE_OUTPUT" in cell.source:
        return []
    lines: list[str] = []
    for output in cell.get("outputs", []):
        if output.output_type == "stream":
            lines += output.text.splitlines()
        elif output.output_type in ("execute_result", "display_data"):
            for mime in COMPARED:
                if mime in output.get("data", {}):
                    lines += [f"[{mime}] {line}" for line in output.data[mime].splitlines()]
        elif output.output_type == "error":
            lines.append(f"ERROR {output.ename}: {output.evalue}")
    for pattern, replace in sanitizers:
        lines = [pattern.sub(replace, line) for line in lines]
    return lines


def run(path: Path, setting: str) -> nbformat.NotebookNode:
    """Execute ``path`` under ``setting`` in a fresh process; return the executed notebook."""
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {sorted(SETTINGS)}, got {setting!r}")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / path.name
        code = (
            "import sys; sys.path.insert(0, 'scripts'); from pathlib import Path; "
            "import execute_notebooks as e, nbformat; "
            f"nb = e.execute_copy(Path({str(path)!r})); nbformat.write(nb, {str(out)!r})"
        )
        env = {**os.environ, **SETTINGS[setting]}
        env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True)
        return nbformat.read(out, as_version=4)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--settings", default="default,avx2,1thread,2threads")
    args = parser.parse_args(argv)
    sanitizers = _sanitizers()
    moved = 0
    for path in args.paths:
        path = path.resolve()
        stored = nbformat.read(path, as_version=4)
        for setting in args.settings.split(","):
            fresh = run(path, setting)
            for index, (old, new) in enumerate(zip(stored.cells, fresh.cells, strict=True)):
                a, b = compared_text(old, sanitizers), compared_text(new, sanitizers)
                if a != b:
                    moved += 1
                    print(f"--- {path.name} cell {index} under {setting}")
                    for line in difflib.unified_diff(a, b, lineterm="", n=0):
                        if not line.startswith(("---", "+++", "@@")):
                            print("   ", line[:220])
    print(f"{moved} cell output(s) differ from the stored ones")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
