"""Every public name of specdec_lib is used outside the tests: by a chapter, a script, a
benchmark or another module of the library.

A public name is one a module defines at its top level (function, class, constant or
type alias) without a leading underscore, and every public method of a public class.
"Used" means it appears as code, not prose: a name read (a variable assigned is not a
use of the library's name), an attribute, an imported name or a keyword argument, or a
string that is nothing but a (dotted) name (``getattr``, ``show_source("...")``), in a
code cell of ``chapters/*.ipynb``, in ``chapters/*.py``,
``scripts/*.py`` or ``benchmarks/*.py``, or in a library module other than the one that
defines it (a name another module needs is part of its module's interface:
``tests/test_layout.py`` refuses a private name used across modules).

A test is not a use: tests must not keep alive code nothing else runs. A name only tests
use is dead code, deleted with its tests, or a test helper, which lives in ``tests/``. A
name only its own module uses is private (a leading underscore), unless a test also
checks it on its own: an internal step a test exercises directly stays public, so the
test need not reach for a private name.

Exemptions, each with its reason, are computed by the rules below, never listed by name:

* re-exports (``from ... import X`` in a package's ``__init__``, ``__all__``) are the
  name they re-export, not a second definition: only definitions are scanned;
* a class, or a type alias (``Rule = Callable[...]``), that a public function or method
  of the same module names in its signature (``-> dict[int, BatchDecodeTiming]``,
  ``rule: Rule``): readers meet it through that function's arguments or result and
  their fields; made private, a public function would take or return a private type;
* a method that overrides one of a base class the library defines (not a ``Protocol``):
  the engine calls it through the base (``NgramDrafter.draft``).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path

import specdec_lib

LIBRARY = Path(specdec_lib.__file__).parent
ROOT = LIBRARY.parent
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def _identifiers(source: str) -> set[str]:
    """Every name the code in ``source`` uses (shell and magic lines skipped)."""
    code = "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()
    )
    found: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.update(node.name.split("."))
        elif isinstance(node, ast.keyword) and node.arg:
            found.add(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if DOTTED.fullmatch(node.value):
                found.update(node.value.split("."))
    return found


#: Where the library's users are: a use in any of these files counts.
USERS = ("chapters/*.ipynb", "chapters/*.py", "scripts/*.py", "benchmarks/*.py")
#: The tests, which are not users (see the module docstring).
TESTS = ("tests/*.py",)


def _user_sources(patterns: tuple[str, ...] = USERS) -> Iterator[tuple[str, str]]:
    """Each file of ``patterns`` as (where, code); a notebook's code cells one by one."""
    for pattern in patterns:
        for path in sorted(ROOT.glob(pattern)):
            where = str(path.relative_to(ROOT))
            if path.suffix == ".ipynb":
                cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
                for i, cell in enumerate(cells):
                    if cell["cell_type"] == "code":
                        yield f"{where} cell {i}", "".join(cell["source"])
            elif path.resolve() != Path(__file__).resolve():
                yield where, path.read_text(encoding="utf-8")


def used_names(patterns: tuple[str, ...] = USERS) -> set[str]:
    """Every name the files of ``patterns`` use."""
    used: set[str] = set()
    for _, source in _user_sources(patterns):
        used |= _identifiers(source)
    return used


def _annotation_names(annotation: ast.expr | None) -> set[str]:
    if annotation is None:
        return set()
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return set(DOTTED.findall(annotation.value))
    return {n.id for n in ast.walk(annotation) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(annotation) if isinstance(n, ast.Attribute)
    }


def _is_type(value: ast.expr | None) -> bool:
    """Whether an assigned ``value`` is a type alias: a subscripted or ``|``-joined type."""
    return isinstance(value, ast.Subscript | ast.BinOp)


def _is_public(name: str) -> bool:
    return not name.startswith("_")


def _functions(body: list[ast.stmt]) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _class_methods() -> dict[str, set[str]]:
    """Method names of every class the library defines, by class name."""
    methods: dict[str, set[str]] = {}
    for path in LIBRARY.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                methods.setdefault(node.name, set()).update(f.name for f in _functions(node.body))
    return methods


def public_names() -> dict[str, str]:
    """``{"module.py:name" or "module.py:Class.method": why it is exempt, or ""}``."""
    methods = _class_methods()
    names: dict[str, str] = {}
    for path in sorted(LIBRARY.rglob("*.py")):
        module = str(path.relative_to(LIBRARY))
        tree = ast.parse(path.read_text(encoding="utf-8"))
        callables = [f for f in _functions(tree.body) if _is_public(f.name)]
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and _is_public(node.name):
                callables += [f for f in _functions(node.body) if _is_public(f.name)]
        in_signatures: set[str] = set()  # the types public callables take and return
        for f in callables:
            arguments = [*f.args.posonlyargs, *f.args.args, *f.args.kwonlyargs]
            arguments += [a for a in (f.args.vararg, f.args.kwarg) if a is not None]
            for annotation in [f.returns, *(a.annotation for a in arguments)]:
                in_signatures |= _annotation_names(annotation)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names[f"{module}:{node.name}"] = ""
            elif isinstance(node, ast.ClassDef):
                names[f"{module}:{node.name}"] = "signature type" * (node.name in in_signatures)
                if not _is_public(node.name):
                    continue
                bases = {b.id if isinstance(b, ast.Name) else "" for b in node.bases}
                inherited = set().union(*(methods.get(b, set()) for b in bases - {"Protocol"}))
                for f in _functions(node.body):
                    why = "overrides a base method" if f.name in inherited else ""
                    names[f"{module}:{node.name}.{f.name}"] = why
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name) and not t.id.startswith("__"):
                        alias = t.id in in_signatures and _is_type(node.value)
                        names[f"{module}:{t.id}"] = "signature type" * alias
    return {
        key: why
        for key, why in names.items()
        if all(_is_public(part) for part in key.split(":")[1].split("."))
    }


def _library_uses() -> dict[str, set[str]]:
    """The names each library module uses, by its path relative to the library; a package's
    ``__init__`` only re-exports, which is not a use."""
    return {
        str(path.relative_to(LIBRARY)): _identifiers(path.read_text(encoding="utf-8"))
        for path in LIBRARY.rglob("*.py")
        if path.name != "__init__.py"
    }


def unused_public_names() -> list[str]:
    used, tested = used_names(), used_names(TESTS)
    library = _library_uses()
    unused = []
    for key, why in public_names().items():
        module, name = key.split(":")[0], key.split(":")[1].split(".")[-1]
        elsewhere = any(name in names for other, names in library.items() if other != module)
        internal_and_tested = name in library.get(module, set()) and name in tested
        if not why and name not in used and not elsewhere and not internal_and_tested:
            unused.append(key)
    return unused


def test_the_scan_sees_code_not_prose_and_finds_the_library_s_names():
    code = "import a.b\nfrom c import d as e\nf.g(h=1, i='j.k')\n# zz\n'a b'\n%time x\nl = 1"
    # not the module c, the alias e, a comment, a magic, nor a variable assigned (l)
    assert _identifiers(code) == set("abdfghijk")
    names = public_names()
    assert "analysis/hypothesis.py:first_tokens" in names
    assert "engine/drafters.py:NgramDrafter.draft" in names  # a method of a public class
    assert not any(":_" in key or "._" in key for key in names)  # private names are not
    assert len(names) > 200 and "show_source" in used_names()
    assert "_identifiers" not in used_names(TESTS)  # this file is not scanned


def test_every_public_name_of_the_library_is_used_outside_its_own_module():
    unused = unused_public_names()
    assert unused == []


def test_a_name_only_tests_use_is_unused_unless_its_own_module_uses_it_too(monkeypatch):
    key = "analysis/hypothesis.py:first_tokens"
    tests_only = {TESTS: {"first_tokens"}}
    monkeypatch.setitem(
        globals(), "used_names", lambda patterns=USERS: tests_only.get(patterns, set())
    )
    monkeypatch.setitem(globals(), "_library_uses", lambda: {"analysis/hypothesis.py": set()})
    assert key in unused_public_names()  # dead code a test keeps alive
    monkeypatch.setitem(
        globals(), "_library_uses", lambda: {"analysis/hypothesis.py": {"first_tokens"}}
    )
    assert key not in unused_public_names()  # an internal step a test checks on its own
