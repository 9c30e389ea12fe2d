"""The library's layout: small modules, private names kept private, imports only downwards.

Three rules a newcomer can rely on when reading ``specdec_lib``:

* a module longer than ``MAX_LINES`` draws a warning, not a failure: a module holds one
  idea, and is split along a seam when it holds two, never to pass a size rule;
* a name with a leading underscore is used only in the module that defines it (imported
  by name, or read as an attribute: ``drafter._cache``); a name another module needs is
  part of its interface, and is public;
* a module imports only from its own package or from packages listed after its own in
  the layer list of ``specdec_lib/__init__.py`` (``checks.py``, the argument checks, sits
  below every package; the package's ``__init__`` re-exports the engine's public names).

The layer list is read from the package docstring, so the docstring and the code cannot
drift apart. Imports are read with ``ast``, including those inside functions.
"""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

import specdec_lib

LIBRARY = Path(specdec_lib.__file__).parent
MAX_LINES = 400


def _layers() -> list[str]:
    """The packages in the docstring's order, highest first."""
    return re.findall(r"^\* ``(\w+)``", specdec_lib.__doc__ or "", flags=re.MULTILINE)


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(LIBRARY.rglob("*.py")):
        parts = path.relative_to(LIBRARY.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(module: str, path: Path) -> list[tuple[str, list[str], int]]:
    """(imported module, imported names, line) for every specdec_lib import in a file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if target.split(".")[0] == "specdec_lib":
                found.append((target, [alias.name for alias in node.names], node.lineno))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "specdec_lib":
                    found.append((alias.name, [], node.lineno))
    return found


def _foreign_private_attributes(tree: ast.Module) -> list[tuple[str, int]]:
    """``x._name`` read where nothing in this module defines ``_name``: another module's
    private attribute (dunders such as ``__name__`` are public)."""
    defined = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Name | ast.Attribute) and isinstance(node.ctx, ast.Store):
            defined.add(node.id if isinstance(node, ast.Name) else node.attr)
        elif isinstance(node, ast.alias):
            defined.add(node.asname or node.name)
    return [
        (node.attr, node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and node.attr not in defined
    ]


def _layer_rank(module: str, layers: list[str]) -> int | None:
    """Lower is deeper; ``None`` for the package itself, which may re-export anything."""
    parts = module.split(".")
    if len(parts) == 1:
        return None
    if parts[1] == "checks":
        return len(layers)
    return layers.index(parts[1]) if parts[1] in layers else -1


#: Private names of third-party libraries a module may read, each with its reason.
#: engine.onednn: PyTorch exposes oneDNN's linear only as ``torch._C._nn.mkldnn_linear``
#: (its public wrapper ``torch.utils.mkldnn.MkldnnLinear`` calls the same, adding a zero
#: bias and TorchScript, about 12 us a call, 211 calls a SmolLM2 pass).
THIRD_PARTY_PRIVATE = {("specdec_lib.engine.onednn", "_C"), ("specdec_lib.engine.onednn", "_nn")}


def layout_problems(modules: dict[str, Path]) -> list[str]:
    layers = _layers()
    problems = []
    for module, path in modules.items():
        rank = _layer_rank(module, layers)
        if rank == -1:
            problems.append(f"{module}: its package is not in the docstring's layer list")
        for name, line in _foreign_private_attributes(ast.parse(path.read_text())):
            if (module, name) not in THIRD_PARTY_PRIVATE:
                problems.append(f"{module}:{line} reads another module's private {name}")
        for target, names, line in _imports(module, path):
            for name in names:
                if name.startswith("_") and target != module:
                    problems.append(f"{module}:{line} imports private {name} from {target}")
            target_rank = _layer_rank(target, layers)
            same_package = target.split(".")[:2] == module.split(".")[:2]
            if rank is None or same_package:
                continue
            if target_rank is None or target_rank <= rank:
                problems.append(f"{module}:{line} imports {target}, which is not below it")
    return problems


def long_modules(modules: dict[str, Path]) -> list[str]:
    """Modules over ``MAX_LINES`` lines: worth a look for a second idea, not an error."""
    return [
        f"{module}: {n} lines, more than {MAX_LINES}"
        for module, path in modules.items()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    ]


def test_a_long_module_is_reported_as_a_warning() -> None:
    for line in long_modules(_modules()):
        warnings.warn(f"{line}: does it hold one idea?", stacklevel=1)


def test_the_docstring_lists_the_layers() -> None:
    assert _layers() == ["grading", "course", "experiments", "analysis", "engine", "text"]


def test_every_module_keeps_its_private_names_and_imports_only_downwards() -> None:
    problems = layout_problems(_modules())
    assert not problems, "\n".join(problems)


def test_the_layout_check_catches_each_kind_of_problem(tmp_path: Path) -> None:
    engine = tmp_path / "specdec_lib" / "engine"
    engine.mkdir(parents=True)
    (engine / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (engine / "private.py").write_text("from specdec_lib.engine.long import _hidden\n")
    (engine / "upwards.py").write_text("from specdec_lib.analysis import theory\n")
    (engine / "reader.py").write_text("def f(drafter):\n    return drafter._cache\n")
    problems = layout_problems(
        {
            "specdec_lib.engine.long": engine / "long.py",
            "specdec_lib.engine.private": engine / "private.py",
            "specdec_lib.engine.upwards": engine / "upwards.py",
            "specdec_lib.engine.reader": engine / "reader.py",
        }
    )
    assert long_modules({"specdec_lib.engine.long": engine / "long.py"}) == [
        f"specdec_lib.engine.long: {MAX_LINES + 1} lines, more than {MAX_LINES}"
    ]
    assert problems == [
        "specdec_lib.engine.private:1 imports private _hidden from specdec_lib.engine.long",
        "specdec_lib.engine.upwards:1 imports specdec_lib.analysis, which is not below it",
        "specdec_lib.engine.reader:2 reads another module's private _cache",
    ]
