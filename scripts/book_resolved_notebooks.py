"""The notebooks the website hands out show numbers in their prose: a local Sphinx extension.

A chapter's Markdown pastes its numbers with ``{glue:text}`name:spec```; only the
website's builder (myst-nb) turns a role into the number. Two buttons of each chapter
page hand the notebook itself to a reader, who would otherwise see the roles:

* the download button (``use_download_button``) serves ``_sources/<chapter>.ipynb``,
  which Sphinx copies from ``chapters/``. After the build, this extension overwrites
  each copy with the resolved notebook (``scripts/resolve_glue.py``): the same
  cells and outputs, every glued number written into the prose as the page shows it.
* the Colab button opens a notebook from GitHub, never from the website; by default
  the source on ``repository.branch``, roles and all. Colab opens any branch, so when
  the built site is published to a branch of the same repository (``ghp-import -n -p
  -f _build/html`` publishes it at the root of ``gh-pages``), set
  ``resolved_notebooks_colab_branch`` to that branch and the Colab button opens the
  resolved copy there (``blob/<branch>/_sources/<chapter>.ipynb``). Left empty, the
  button is not changed.

Binder builds from the repository, not from the site: ``binder/postBuild`` resolves
the chapters in the Binder image. The repository keeps one source per chapter.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
from sphinx.application import Sphinx
from sphinx.util import logging

from resolve_glue import count_glue_roles, resolve_glue

LOGGER = logging.getLogger(__name__)
COLAB_REPO = re.compile(r"^(?P<repo>.*/github/[^/]+/[^/]+)/blob/")


def source_copy(outdir: Path, docname: str, sourcelink_suffix: str) -> Path:
    """Where Sphinx copies a notebook page's source (what the download button serves)."""
    name = docname + ".ipynb"
    if sourcelink_suffix != ".ipynb":
        name += sourcelink_suffix
    return outdir / "_sources" / name


def write_resolved_copies(app: Sphinx, exception: Exception | None) -> None:
    """Overwrite each notebook's copy under ``_sources/`` with its resolved version."""
    if exception is not None or app.builder.format != "html":
        return
    written = 0
    for docname in sorted(app.env.found_docs):
        source = Path(app.env.doc2path(docname))
        target = source_copy(Path(app.outdir), docname, app.config.html_sourcelink_suffix)
        if source.suffix != ".ipynb" or not target.exists():
            continue
        resolved = resolve_glue(nbformat.read(source, as_version=4), docname)
        if count_glue_roles(resolved):
            raise RuntimeError(f"{docname}: raw glue roles survived resolution")
        nbformat.write(resolved, target)
        written += 1
    LOGGER.info(f"resolved glue roles in {written} downloadable notebooks")


def colab_url(url: str, branch: str, sourcename: str) -> str:
    """The Colab ``url`` of a page, redirected to its resolved copy on the site's ``branch``."""
    found = COLAB_REPO.match(url)
    if not found:
        raise ValueError(f"url is not a Colab GitHub URL: {url!r}")
    return f"{found.group('repo')}/blob/{branch}/_sources/{sourcename}"


def point_colab_at_resolved_copy(
    app: Sphinx, pagename: str, templatename: str, context: dict, doctree: object
) -> None:
    """On a notebook page, make the Colab launch button open the resolved copy."""
    branch = app.config.resolved_notebooks_colab_branch
    sourcename = context.get("sourcename", "")
    if not branch or not sourcename.endswith(".ipynb" + app.config.html_sourcelink_suffix):
        return
    for group in context.get("header_buttons", []):
        if group.get("label") != "launch-buttons":
            continue
        for button in group.get("buttons", []):
            if button.get("text") == "Colab":
                button["url"] = colab_url(button["url"], branch, sourcename)


def setup(app: Sphinx) -> dict[str, object]:
    app.add_config_value("resolved_notebooks_colab_branch", "", "html", types=[str])
    app.connect("build-finished", write_resolved_copies)
    # After sphinx-book-theme's add_launch_buttons (priority 501) has made the button.
    app.connect("html-page-context", point_colab_at_resolved_copy, priority=502)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
