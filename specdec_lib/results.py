"""Committed benchmark results, found wherever the chapter runs.

A measurement too slow for a one-minute chapter is made by a script in
``benchmarks/`` and committed as JSON under ``benchmarks/results/``; the chapter
plots the file and says so. This module finds that file from a clone of the
repository (any working directory inside it), and in Colab, where only the
library is installed, fetches it from the repository at exactly the commit
pip installed, so the numbers shown belong to the code that runs.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path
from urllib.request import urlopen

RESULTS = Path("benchmarks") / "results"


def _candidates(name: str) -> list[Path]:
    roots = [Path(__file__).resolve().parent.parent, *Path.cwd().resolve().parents]
    roots.insert(1, Path.cwd().resolve())
    return [root / RESULTS / f"{name}.json" for root in roots]


def raw_url(direct_url: dict, name: str) -> str | None:
    """Where the result sits in the GitHub repository pip installed from, at that commit.

    ``direct_url`` is pip's record of a ``git+https://github.com/...`` install
    (PEP 610); anything else gives None.
    """
    url = str(direct_url.get("url", "")).removesuffix("/").removesuffix(".git")
    commit = direct_url.get("vcs_info", {}).get("commit_id")
    if not commit or not url.startswith("https://github.com/"):
        return None
    repo = url.removeprefix("https://github.com/")
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{RESULTS.as_posix()}/{name}.json"


def load_result(name: str) -> dict:
    """The committed benchmark result ``benchmarks/results/<name>.json``."""
    for path in _candidates(name):
        if path.is_file():
            return json.loads(path.read_text())
    try:
        record = metadata.distribution("specdec_lib").read_text("direct_url.json")
        direct = json.loads(record or "{}")
    except metadata.PackageNotFoundError:
        direct = {}
    url = raw_url(direct, name)
    if url is None:
        raise FileNotFoundError(
            f"benchmarks/results/{name}.json not found; run the script in benchmarks/ "
            "that writes it, from a clone of the course repository"
        )
    with urlopen(url, timeout=30) as response:
        return json.loads(response.read())
