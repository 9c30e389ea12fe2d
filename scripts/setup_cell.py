"""The set-up cell every chapter starts with, derived from ``_config.yml``.

In Google Colab nothing of the course is installed, so the first cell of every
notebook clones the repository, pip-installs the library from the clone and moves into
its chapters folder (where the committed benchmark results are found); anywhere else (a clone,
Binder, CI) the library is already installed and the cell does nothing. The
repository URL is written in one place, ``repository.url`` in ``_config.yml``;
this script renders the cell from it.

    python scripts/setup_cell.py           # print the cell
    python scripts/setup_cell.py --write   # make it the first cell of every chapter notebook

``tests/test_book.py`` fails when a notebook's first cell differs from it, so
after changing the URL run ``--write`` and then ``scripts/execute_notebooks.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent
TAGS = ["remove-cell"]


def repository_url(root: Path = ROOT) -> str:
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    return config["repository"]["url"].rstrip("/")


def setup_source(root: Path = ROOT) -> str:
    url = repository_url(root)
    return (
        "# Set-up: in Google Colab, fetch the course and install its library;\n"
        "# elsewhere, do nothing.\n"
        "import os\n"
        "import subprocess\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        '    course = "/content/specdec-course"\n'
        "    if not os.path.isdir(course):\n"
        f'        url = "{url}"\n'
        '        clone = ["git", "clone", "-q", "--depth", "1", url, course]\n'
        "        subprocess.run(clone, check=True)\n"
        '    pip = [sys.executable, "-m", "pip", "install", "-q"]\n'
        '    subprocess.run([*pip, f"{course}[course]"], check=True)\n'
        "    # benchmark results are read from here\n"
        '    os.chdir(f"{course}/chapters")'
    )


def write(path: Path, source: str) -> bool:
    """Make ``source`` the notebook's first cell; return whether the file changed."""
    nb = nbformat.read(path, as_version=4)
    first = nb.cells[0] if nb.cells else None
    if first is not None and first.cell_type == "code" and first.source.startswith("# Set-up:"):
        if first.source == source and first.metadata.get("tags") == TAGS:
            return False
        first.source = source
        first.metadata["tags"] = list(TAGS)
    else:
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["tags"] = list(TAGS)
        nb.cells.insert(0, cell)
    nbformat.write(nb, path)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="update every chapters/*.ipynb")
    args = parser.parse_args(argv)
    source = setup_source()
    if not args.write:
        print(source)
        return 0
    for path in sorted((ROOT / "chapters").glob("*.ipynb")):
        if write(path, source):
            print(f"updated {path.relative_to(ROOT)}: re-execute it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
