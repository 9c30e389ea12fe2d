"""One name, one module: no two modules of the library share a file name across packages.

A reader who meets ``exact`` or ``replay`` in an import should not have to ask which
package's module it is (issue 41: ``exact``, ``replay``, ``trees`` and ``goodput`` once
named a module in both ``analysis`` and ``grading``). The benchmarks' shared modules
(those the scripts import, such as ``harness``) count too: a script's ``import harness``
must not be mistaken for a library module. Package markers (``__init__``, ``__main__``)
are not names.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import specdec_lib

LIBRARY = Path(specdec_lib.__file__).parent
BENCHMARKS = LIBRARY.parent / "benchmarks"
MARKERS = {"__init__", "__main__"}


def _benchmark_modules() -> set[str]:
    """The benchmark folder's modules that its scripts import (not the scripts themselves)."""
    local = {p.stem for p in BENCHMARKS.glob("*.py")}
    imported = set()
    for path in BENCHMARKS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module in local:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported |= {a.name for a in node.names if a.name in local}
    return imported


def _clashes(places: dict[str, list[str]]) -> dict[str, list[str]]:
    return {name: where for name, where in places.items() if len(where) > 1}


def module_places() -> dict[str, list[str]]:
    places: dict[str, list[str]] = defaultdict(list)
    for path in sorted(LIBRARY.rglob("*.py")):
        if path.stem not in MARKERS:
            places[path.stem].append(str(path.relative_to(LIBRARY.parent)))
    for name in sorted(_benchmark_modules()):
        places[name].append(f"benchmarks/{name}.py")
    return places


def test_no_two_modules_share_a_name():
    clashes = _clashes(module_places())
    assert not clashes, f"module names used twice: {clashes}"


def test_the_check_sees_a_clash_and_the_benchmarks_shared_modules():
    assert "harness" in _benchmark_modules()
    planted = module_places()
    name = next(iter(planted))
    planted[name] = [*planted[name], f"specdec_lib/elsewhere/{name}.py"]
    assert name in _clashes(planted)
