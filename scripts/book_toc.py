"""The book's table of contents, read one way for every script, extension and test."""

from __future__ import annotations

from pathlib import Path

import yaml


def toc_files(root: Path) -> list[str]:
    """Every file entry of ``root/_toc.yml`` as written there, the root page first."""

    def files(entries: list[dict]) -> list[str]:
        out = []
        for entry in entries:
            if "file" in entry:
                out.append(entry["file"])
            for key in ("chapters", "sections", "parts"):
                out.extend(files(entry.get(key, [])))
        return out

    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    return [toc["root"], *files([toc])]


def toc_notebooks(root: Path) -> list[Path]:
    """The notebooks listed in the table of contents, in reading order."""
    stems = [f.removesuffix(".ipynb").removesuffix(".md") for f in toc_files(root)]
    return [root / f"{s}.ipynb" for s in stems if (root / f"{s}.ipynb").is_file()]
