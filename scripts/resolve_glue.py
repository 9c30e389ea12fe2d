"""Glued numbers written into the prose, for every place a notebook is read without the website.

On the website, ``{glue:text}`tpp:.2f``` in a Markdown cell shows the value a code cell
glued under ``tpp``, formatted by myst-nb when the book is built. Anywhere else (a
generated student notebook, Binder's JupyterLab, Colab, the notebook the site's
download button serves) nobody runs myst-nb, and the reader would see the role itself.
:func:`resolve_glue` writes the stored value into the Markdown instead, formatted
exactly as the website shows it, so the prose reads the same in every route while the
repository keeps one source per chapter (the roles stay in ``chapters/``; resolved
copies are generated where they are needed).

It needs only the standard library, because Binder and Colab have no myst-nb. Where
myst-nb is installed its own ``format_plain_text`` formats the value (so an upgrade
cannot make the two disagree); elsewhere a copy of its rule does, and the tests check
that the two agree. A role whose name no code cell of the notebook glues, a role that
cannot be formatted, or a glue form this module cannot write as Markdown (a glued
figure, say) raises ``ValueError``: a notebook is resolved whole or not at all.

    python scripts/resolve_glue.py chapters/*.ipynb               # in place (Binder)
    python scripts/resolve_glue.py chapters/*.ipynb --out DIR     # resolved copies
    python scripts/resolve_glue.py chapters/*.ipynb --count       # raw roles, per file

It is book-build tooling, not part of the library: nothing a chapter runs needs it. The
build (``book_resolved_notebooks.py``), the student notebooks (``student_notebooks.py``)
and Binder (``binder/postBuild``) use it from this folder.
"""

from __future__ import annotations

import argparse
import ast
import copy
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

try:  # the website's own rule, where the website's builder is installed
    from myst_nb.core.variables import format_plain_text as _myst_format_plain_text
except ImportError:  # Binder, Colab, a bare kernel
    _myst_format_plain_text = None

__all__ = ["count_glue_roles", "format_glue_text", "main", "resolve_glue"]

# A MyST role: ``{name}`` immediately followed by a backtick code span.
_ROLE = re.compile(r"\{(?P<name>[A-Za-z0-9_\-+:]+)\}(?P<ticks>`+)")
# A fence line: backticks or tildes (code, or a directive) or colons (a directive).
_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,}|:{3,})(?P<info>.*)$")
_DIRECTIVE = re.compile(r"^\s*\{(?P<name>[^}\s]+)\}")
# Directives whose body is not Markdown: a role-like text inside them is not a role.
_LITERAL_DIRECTIVES = {
    "code",
    "code-block",
    "code-cell",
    "sourcecode",
    "literalinclude",
    "math",
    "raw",
    "eval-rst",
}
# What Markdown could read as markup in a glued string (numbers never contain these).
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>$|~&])")

# What the glue callback receives: kind ("role" or "directive"), name, content, raw text.
_GlueCallback = Callable[[str, str, str, str], str]


def _format_plain_text(text: str, spec: str) -> str:
    """myst-nb's ``format_plain_text`` (myst_nb/core/variables.py), for where it is absent.

    The stored ``text/plain`` is ``literal_eval``-ed (so a glued string loses its
    quotes), then formatted by the type character that ends the spec.
    """
    try:
        value: Any = ast.literal_eval(text)
    except (SyntaxError, ValueError):
        value = text
    if spec == "":
        return str(value)
    type_char = spec[-1]
    if type_char == "s":
        value = str(value)
    elif type_char in ("b", "c", "d", "o", "x", "X"):
        value = int(value)
    elif type_char in ("e", "E", "f", "F", "g", "G", "n", "%"):
        value = float(value)
    return format(value, spec)


def format_glue_text(text: str, spec: str = "") -> str:
    """A glued value's stored ``text/plain`` as ``{glue:text}`name:spec``` shows it on the site.

    ``text`` is what ``glue`` stored (``"0.6123"``, ``"'copy'"``); ``spec`` is the
    format spec after the last colon of the role, ``""`` where the role has none
    (myst-nb then formats with ``"s"``, which gives the same text).
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be the stored text/plain string, got {type(text).__name__}")
    if not isinstance(spec, str):
        raise ValueError(f"spec must be a format spec string, got {type(spec).__name__}")
    if _myst_format_plain_text is not None:
        return _myst_format_plain_text(text, spec)
    return _format_plain_text(text, spec)


# ---------------------------------------------------------------------------------
# Finding the roles: outside code spans, code blocks, literal directives and math
# ---------------------------------------------------------------------------------


def _closing_ticks(text: str, start: int, ticks: int) -> int | None:
    """Where the code span opened by ``ticks`` backticks just before ``start`` closes."""
    for found in re.finditer(r"`+", text[start:]):
        if len(found.group()) == ticks:
            return start + found.start()
    return None


def _inline(paragraph: str, on_glue: _GlueCallback) -> str:
    """``paragraph`` with every glue role replaced by what ``on_glue`` returns for it.

    Scanned left to right the way MyST reads inline Markdown: a backslash escapes the
    next character, a code span or ``$`` math is copied as it is (a role-like text
    inside one is not a role), and a role is ``{name}`` followed by a code span.
    """
    out: list[str] = []
    i = 0
    while i < len(paragraph):
        char = paragraph[i]
        if char == "\\":
            out.append(paragraph[i : i + 2])
            i += 2
            continue
        role = _ROLE.match(paragraph, i) if char == "{" else None
        if role or char == "`":
            opened = role.end() if role else re.match(r"`+", paragraph[i:]).end() + i
            ticks = len(role.group("ticks")) if role else opened - i
            close = _closing_ticks(paragraph, opened, ticks)
            if close is None:  # not a code span: literal text
                out.append(paragraph[i:opened])
                i = opened
                continue
            raw = paragraph[i : close + ticks]
            name = role.group("name") if role else ""
            if name == "glue" or name.startswith("glue:"):
                out.append(on_glue("role", name, paragraph[opened:close], raw))
            else:
                out.append(raw)
            i = close + ticks
            continue
        if char == "$":
            delimiter = "$$" if paragraph.startswith("$$", i) else "$"
            close = paragraph.find(delimiter, i + len(delimiter))
            while close != -1 and paragraph[close - 1] == "\\":
                close = paragraph.find(delimiter, close + 1)
            if close != -1:
                out.append(paragraph[i : close + len(delimiter)])
                i = close + len(delimiter)
                continue
        out.append(char)
        i += 1
    return "".join(out)


def _prose(block: list[str], on_glue: _GlueCallback) -> list[str]:
    """Lines of Markdown prose, each paragraph scanned for roles on its own."""
    paragraphs = re.split(r"(\n[ \t]*\n)", "\n".join(block))
    return "".join(
        _inline(p, on_glue) if i % 2 == 0 else p for i, p in enumerate(paragraphs)
    ).split("\n")


def _markdown(source: str, on_glue: _GlueCallback) -> str:
    """``source`` (a Markdown cell) with every glue role and directive passed to ``on_glue``.

    Code fences and literal directives (``{code-cell}``, ``{math}`` …) are copied as
    they are; the body and title of any other directive (``{exercise}``,
    ``{prf:theorem}``, an admonition) is prose, and is scanned.
    """
    out: list[str] = []
    block: list[str] = []
    fences: list[tuple[str, bool]] = []  # open fences: (fence, literal body?)

    def flush() -> None:
        out.extend(_prose(block, on_glue) if block else [])
        block.clear()

    for line in source.split("\n"):
        found = _FENCE.match(line)
        fence = found.group("fence") if found else ""
        closes = (
            fences
            and fence
            and fence[0] == fences[-1][0][0]
            and len(fence) >= len(fences[-1][0])
            and not found.group("info").strip()
        )
        if fences and fences[-1][1]:  # inside code: nothing is a role
            out.append(line)
            if closes:
                fences.pop()
            continue
        if closes:
            flush()
            out.append(line)
            fences.pop()
        elif found and (fence[0] != ":" or _DIRECTIVE.match(found.group("info"))):
            flush()
            directive = _DIRECTIVE.match(found.group("info"))
            name = directive.group("name") if directive else ""
            literal = name in _LITERAL_DIRECTIVES or (not directive and fence[0] != ":")
            fences.append((fence, literal))
            if name == "glue" or name.startswith("glue:"):
                out.append(on_glue("directive", name, found.group("info"), line))
            elif directive and not literal:  # its title is prose
                at = line.index("}", line.index("{" + name)) + 1
                out.append(line[:at] + _inline(line[at:], on_glue))
            else:
                out.append(line)
        else:
            block.append(line)
    flush()
    return "\n".join(out)


# ---------------------------------------------------------------------------------
# The stored values, and the resolution
# ---------------------------------------------------------------------------------


def _text(source: Any) -> str:
    """A cell's source or an output's data, stored as one string or a list of lines."""
    return "".join(source) if isinstance(source, list) else source


def _cells(nb: Any) -> list:
    if not isinstance(nb, Mapping) or not isinstance(nb.get("cells"), list):
        raise ValueError("nb must be a notebook: a mapping with a list of cells")
    return nb["cells"]


def _glued(nb: Mapping, where: str) -> dict[str, dict[str, str]]:
    """``{name: mime bundle}`` for every ``glue`` call stored in the notebook's outputs."""
    glued: dict[str, dict[str, str]] = {}
    for cell in _cells(nb):
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            scrapbook = output.get("metadata", {}).get("scrapbook")
            if not scrapbook:
                continue
            name, prefix = scrapbook["name"], scrapbook.get("mime_prefix", "")
            if name in glued:  # the website's build fails on it too (a warning, -W)
                raise ValueError(f"{where}: the glue name {name!r} is glued twice")
            glued[name] = {
                key[len(prefix) :]: _text(value)
                for key, value in output.get("data", {}).items()
                if key.startswith(prefix)
            }
    return glued


def _escape(text: str) -> str:
    """``text`` with what Markdown would read as markup escaped, so it shows as it is."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def _resolver(glued: dict[str, dict[str, str]], where: str) -> _GlueCallback:
    """The ``on_glue`` callback that writes each role's value as the website shows it."""

    def resolve(kind: str, name: str, content: str, raw: str) -> str:
        if kind == "directive":
            raise ValueError(
                f"{where}: the glue directive {raw.strip()!r} cannot be written as "
                "Markdown here; only glue roles with a text value can"
            )
        key, spec = content, "s"  # myst-nb's default for a role without a spec
        if name == "glue:text" and ":" in content:
            key, spec = content.rsplit(":", 1)
        if "::" in key:
            raise ValueError(f"{where}: {raw} glues from another document; resolve it there")
        if key not in glued:
            raise ValueError(
                f"{where}: {raw} names {key!r}, which no code cell of this notebook glues "
                "(were its outputs stored?)"
            )
        data = glued[key]
        if name == "glue:md" and "text/markdown" in data:
            return data["text/markdown"]
        if name in ("glue", "glue:", "glue:any") and set(data) == {"text/plain"}:
            return _escape(data["text/plain"])  # myst-nb pastes text/plain as stored
        if name != "glue:text" or "text/plain" not in data:
            raise ValueError(
                f"{where}: {raw} pastes {sorted(data)}, which cannot be written as "
                "Markdown here; use {glue:text} for a number or a string"
            )
        try:
            return _escape(format_glue_text(data["text/plain"], spec))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {raw} cannot format {data['text/plain']!r}: {exc}") from exc

    return resolve


def resolve_glue(nb: Any, name: str = "notebook") -> Any:
    """A copy of notebook ``nb`` whose Markdown shows each glued value instead of its role.

    Every ``{glue:text}`key:spec``` (and ``{glue}`key``` with a text value) in a
    Markdown cell becomes the value the notebook's stored outputs glued under ``key``,
    formatted as the website formats it. ``nb`` is a notebook as ``nbformat`` or
    ``json`` reads it; it is not modified. ``name`` appears in error messages.
    """
    if not isinstance(name, str):
        raise ValueError(f"name must be a string, got {type(name).__name__}")
    glued = _glued(nb, name)
    out = copy.deepcopy(nb)
    for index, cell in enumerate(out["cells"]):
        if cell.get("cell_type") == "markdown":
            resolve = _resolver(glued, f"{name}, cell {index}")
            cell["source"] = _markdown(_text(cell.get("source", "")), resolve)
    return out


def count_glue_roles(nb: Any) -> int:
    """How many glue roles and directives the Markdown cells of ``nb`` still show raw.

    Zero for a resolved notebook; what a reader sees wherever nothing resolves them.
    """
    count = 0

    def tally(kind: str, name: str, content: str, raw: str) -> str:
        nonlocal count
        count += 1
        return raw

    for cell in _cells(nb):
        if cell.get("cell_type") == "markdown":
            _markdown(_text(cell.get("source", "")), tally)
    return count


def main(argv: list[str] | None = None) -> int:
    """Resolve notebooks in place, write resolved copies, or count their raw roles."""
    import nbformat

    parser = argparse.ArgumentParser(
        prog="python scripts/resolve_glue.py",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("notebooks", type=Path, nargs="+")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--out", type=Path, help="write resolved copies here, not in place")
    what.add_argument("--count", action="store_true", help="print raw roles; change nothing")
    args = parser.parse_args(argv)
    total = 0
    for path in args.notebooks:
        nb = nbformat.read(path, as_version=4)
        if args.count:
            raw = count_glue_roles(nb)
            total += raw
            print(f"{path}: {raw} raw glue roles")
            continue
        target = args.out / path.name if args.out else path
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(resolve_glue(nb, path.name), target)
        print(f"{target}: resolved")
    if args.count:
        print(f"total: {total} raw glue roles in {len(args.notebooks)} notebooks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
