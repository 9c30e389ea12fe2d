"""Make every page of the site render with no network and no JavaScript error.

A local Sphinx extension, wired in by ``_config.yml``. It does three things.

1. **Third-party JavaScript is served from the build.** ``npm ci`` installs
   MathJax, RequireJS and the Jupyter widgets HTML manager into
   ``node_modules/`` (never committed); this extension copies the parts a
   browser loads into ``_build/html/_static/offline/``, and ``_config.yml``
   points ``mathjax_path`` and ``nb_ipywidgets_js`` at those copies. The build
   stops early, naming the command to run, if the packages are missing: a site
   that quietly fell back to a CDN would look fine here and break for an
   offline reader.
2. **Pages with saved widgets can find the widget renderer's own files.** The
   renderer loads its icon fonts relative to the AMD module path
   ``@jupyter-widgets/html-manager/dist``; a ``require.config`` mapping that
   path onto the local copy keeps it off the network. It also typesets widget
   labels through MathJax 2's ``MathJax.Hub.Queue``, which MathJax 3 no longer
   has; a small shim maps that call onto MathJax 3.
3. **No inline script is included twice.** With Jupyter Book 1.0.4 and
   Sphinx 7.4, inline scripts that extensions add after the builder starts
   (sphinx-togglebutton's and sphinx-thebe's) reach each page twice, and the
   second ``const THEBE_JS_URL`` throws a ``SyntaxError`` on every page.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

STATIC = "offline"  # _build/html/_static/offline/

# (package folder under node_modules, files and folders to copy, destination under STATIC)
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

MATHJAX2_SHIM = """\
// @jupyter-widgets/html-manager typesets widget labels with MathJax 2's API;
// map MathJax.Hub.Queue(["Typeset", MathJax.Hub, element]) onto MathJax 3.
if (window.MathJax && !window.MathJax.Hub) {
  window.MathJax.Hub = {
    Queue: function (command) {
      var element = Array.isArray(command) ? command[2] : null;
      if (!element || !window.MathJax.startup) return;
      window.MathJax.startup.promise.then(function () {
        return window.MathJax.typesetPromise([element]);
      });
    },
  };
}
"""


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
    offline = Path(app.outdir) / "_static" / STATIC
    for package, items, dest in ASSETS:
        source = _source(app, package)
        for item in items:
            src = source / item
            if item == "dist":
                relative = Path(".")
            elif item.startswith("es5/"):  # MathJax's loader expects es5/'s layout below it
                relative = Path(item).relative_to("es5")
            else:
                relative = Path(item)
            target = offline / dest / relative
            if src.is_dir():
                shutil.copytree(
                    src, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.map")
                )
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, target)
    (offline / "mathjax2-shim.js").write_text(MATHJAX2_SHIM, encoding="utf-8")


def _key(script: Any) -> tuple[str, int, str]:
    attributes = json.dumps(getattr(script, "attributes", {}), sort_keys=True)
    return (getattr(script, "filename", None) or "", getattr(script, "priority", 0), attributes)


def fix_page_scripts(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
) -> None:
    scripts = context.get("script_files")
    if scripts is None:
        return
    seen: set[tuple[str, int, str]] = set()
    unique = []
    for script in scripts:
        key = _key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)

    embed = f"_static/{STATIC}/html-manager/embed-amd.js"
    names = [getattr(s, "filename", None) or "" for s in unique]
    if embed in names:
        from sphinx.builders.html._assets import _JavaScript

        dist = context["pathto"](f"_static/{STATIC}/html-manager", 1)
        paths = json.dumps({"@jupyter-widgets/html-manager/dist": dist})
        config = _JavaScript("", body=f"require.config({{paths: {paths}}});")
        unique.insert(names.index(embed), config)
        shim = _JavaScript(f"_static/{STATIC}/mathjax2-shim.js", defer="defer", priority=900)
        unique.append(shim)
    scripts[:] = unique


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("builder-inited", check_assets)
    app.connect("html-page-context", fix_page_scripts)
    app.connect("build-finished", copy_assets)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
