"""Serve the site's third-party JavaScript from the build, never from a CDN.

A local Sphinx extension (wired in by ``_config.yml``). ``npm ci`` installs
MathJax, RequireJS and the Jupyter widgets HTML manager into ``node_modules/``
(never committed); this extension copies the parts a browser loads into
``_build/html/_static/offline/``. ``_config.yml`` points ``mathjax_path`` and
``nb_ipywidgets_js`` at those copies, so math and widget state render with no
network. The build fails early, with the command to run, if the packages are
missing: a site that silently fell back to a CDN would pass every check here
and break for an offline reader.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

# (package folder under node_modules, files and folders to copy, destination under _static/vendor)
ASSETS: list[tuple[str, list[str], str]] = [
    (
        "mathjax",
        [
            "LICENSE",
            "es5/tex-mml-chtml.js",
            "es5/input",
            "es5/output/chtml.js",
            "es5/output/chtml",
            "es5/a11y",
            "es5/ui",
            "es5/sre",
            "es5/adaptors",
        ],
        "mathjax",
    ),
    ("requirejs", ["require.js"], "requirejs"),
    ("@jupyter-widgets/html-manager", ["dist"], "html-manager"),
]


def _source(app: Sphinx, package: str) -> Path:
    folder = Path(app.srcdir) / "node_modules" / package
    if not folder.is_dir():
        raise ExtensionError(
            f"{folder} is missing: run `npm ci` in {app.srcdir} before building the book "
            "(scripts/build_book.sh does this)."
        )
    return folder


def check_assets(app: Sphinx) -> None:
    for package, _, _ in ASSETS:
        _source(app, package)


def copy_assets(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    vendor = Path(app.outdir) / "_static" / "offline"
    for package, items, dest in ASSETS:
        source = _source(app, package)
        for item in items:
            src = source / item
            # es5/ is MathJax's own root: keep its layout below it, which the loader expects.
            relative = Path(item).relative_to("es5") if item.startswith("es5/") else Path(item)
            if src.is_dir() and item == "dist":
                relative = Path(".")
            target = vendor / dest / relative
            if src.is_dir():
                shutil.copytree(
                    src, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.map")
                )
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, target)


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("builder-inited", check_assets)
    app.connect("build-finished", copy_assets)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
