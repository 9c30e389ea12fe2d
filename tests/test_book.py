"""The book's own consistency: table of contents, stored notebooks, conventions, set-up.

These run in a second and catch what strict nbval cannot: a chapter left out of
the table of contents, a notebook committed without being executed top to
bottom, an ignored output with no reason given, a repository URL typed twice.
"""

from __future__ import annotations

import ast
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "chapters"
NOTEBOOKS = sorted(CHAPTERS.glob("*.ipynb"))
NBVAL_MARKERS = (
    "NBVAL_IGNORE_OUTPUT",
    "NBVAL_SKIP",
    "NBVAL_RAISES_EXCEPTION",
    "NBVAL_CHECK_OUTPUT",
)

sys.path.insert(0, str(ROOT / "scripts"))
import book_numbering  # noqa: E402
import book_toc  # noqa: E402
from setup_cell import TAGS as SETUP_TAGS  # noqa: E402
from setup_cell import repository_url, setup_source  # noqa: E402


def toc_files() -> list[str]:
    return book_toc.toc_files(ROOT)


def config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))


def _ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def code_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code"]


# --- table of contents -------------------------------------------------------------------


def test_every_notebook_in_chapters_is_in_the_toc():
    listed = {f.removesuffix(".ipynb").removesuffix(".md") for f in toc_files()}
    missing = [p.name for p in NOTEBOOKS if f"chapters/{p.stem}" not in listed]
    assert not missing, f"notebooks in chapters/ but not in _toc.yml: {missing}"


def test_every_toc_entry_names_an_existing_page():
    missing = []
    for entry in toc_files():
        stem = ROOT / entry.removesuffix(".ipynb").removesuffix(".md")
        if not any(stem.with_suffix(s).is_file() for s in (".ipynb", ".md")):
            missing.append(entry)
    assert not missing, f"_toc.yml entries with no file: {missing}"


def test_the_toc_lists_no_page_twice():
    files = [f.removesuffix(".ipynb").removesuffix(".md") for f in toc_files()]
    assert len(files) == len(set(files)), f"duplicate _toc.yml entries in {files}"


def test_every_notebook_in_the_toc_has_a_measured_time_for_the_teachers_page():
    # The teachers' page renders specdec_lib/results/chapter_times.json at build time
    # (scripts/book_chapter_times.py); a chapter added without timing it would be missing.
    data = json.loads(
        (ROOT / "specdec_lib" / "results" / "chapter_times.json").read_text(encoding="utf-8")
    )
    notebooks = [
        Path(f).name.removesuffix(".ipynb") + ".ipynb"
        for f in toc_files()
        if (ROOT / (f.removesuffix(".ipynb").removesuffix(".md") + ".ipynb")).is_file()
    ]
    assert notebooks, "no notebook found in _toc.yml"
    missing = [n for n in notebooks if n not in data["notebooks"]]
    assert not missing, (
        f"no measured time for {missing}: run `OMP_NUM_THREADS=1 python scripts/time_chapters.py`"
    )
    for name in notebooks:
        entry = data["notebooks"][name]
        assert entry["seconds"] > 0 and entry["peak_rss_mb"] > 0, name
    assert {"cpu", "cores", "python", "torch"} <= set(data["machine"])


def test_every_chapter_appears_in_the_landing_pages_chapter_map():
    intro = (CHAPTERS / "intro.md").read_text(encoding="utf-8")
    missing = [p.name for p in NOTEBOOKS if f"]({p.name})" not in intro]
    assert not missing, f"add these chapters to the chapter map in chapters/intro.md: {missing}"


# --- configuration -------------------------------------------------------------------------


def test_the_site_is_built_from_stored_outputs_without_executing():
    assert config()["execute"]["execute_notebooks"] in ("off", False)


def test_the_repository_url_is_written_only_in_config_and_readme():
    url = repository_url()
    assert url.startswith("https://github.com/")
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    allowed = {"_config.yml", "README.md"}
    offenders = []
    for name in tracked:
        path = ROOT / name
        if name in allowed or path.suffix == ".ipynb" or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if url in text:
            offenders.append(name)
    assert not offenders, f"repository URL typed outside _config.yml: {offenders}"


def test_binder_installs_the_same_torch_release_as_requirements():
    def torch_pin(path: Path) -> str:
        for line in path.read_text(encoding="utf-8").splitlines():
            match = re.match(r"torch==([0-9.]+)", line.strip())
            if match:
                return match.group(1)
        raise AssertionError(f"no torch== pin in {path}")

    assert torch_pin(ROOT / "binder" / "requirements.txt") == torch_pin(ROOT / "requirements.txt")


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "--extra-index-url", "-e .[course]")):
            continue
        name, sep, version = line.partition("==")
        assert sep and version and " " not in line, f"{path.name}: not an exact pin: {line!r}"
        pins[name.lower()] = version
    return pins


def test_every_installed_package_is_locked_to_one_version_and_binder_uses_the_same_lock():
    locked = _pins(ROOT / "requirements.txt")
    binder = _pins(ROOT / "binder" / "requirements.txt")
    assert {"torch", "transformers", "numpy", "matplotlib", "nbconvert", "jupyter-book"} <= set(
        locked
    )
    assert binder.pop("torch") == locked["torch"] + "+cpu"
    assert binder.pop("jupyterlab-myst")
    assert binder == {k: v for k, v in locked.items() if k != "torch"}
    wanted = [
        re.split(r"[=<>\[ ;]", line.strip())[0].lower()
        for line in (ROOT / "requirements.in").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith(("#", "-e"))
    ]
    assert set(wanted) <= set(locked), "requirements.in names a package the lock lacks"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    match = re.search(
        r"## Set up\n.*?```(?:bash|sh)?\n(.*?)```.*?```(?:bash|sh)?\n(.*?)```", readme, re.S
    )
    assert match, "README's 'Set up' section must hold the two set-up commands in code blocks"
    test_command = match.group(2).strip()
    assert test_command == "pytest"
    assert re.search(r"^\s*pytest\s*$", ci, re.M), ".ci/run must run exactly `pytest`"


# --- stored notebooks ----------------------------------------------------------------------


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_starts_with_the_colab_set_up_cell(path):
    nb = nbformat.read(path, as_version=4)
    first = nb.cells[0]
    assert first.cell_type == "code" and first.source == setup_source(), (
        f"{path.name}: first cell must be the set-up cell; "
        "run `python scripts/setup_cell.py --write`"
    )
    assert first.metadata.get("tags") == SETUP_TAGS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_is_stored_executed_top_to_bottom_in_a_python3_kernel(path):
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"
    counts = [c.execution_count for c in code_cells(nb)]
    expected = list(range(1, len(counts) + 1))
    assert counts == expected, (
        f"{path.name}: execution counts {counts} are not 1..n in order; "
        "re-execute with `python scripts/execute_notebooks.py`"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_stores_no_error_and_no_machine_specific_path(path):
    nb = nbformat.read(path, as_version=4)
    for index, cell in enumerate(code_cells(nb)):
        for output in cell.outputs:
            assert output.output_type != "error", f"{path.name} code cell {index} stored an error"
            text = str(output)
            for leak in ("/work/", "/home/", "/root/", "/tmp/", "site-packages"):
                assert leak not in text, (
                    f"{path.name} code cell {index} prints a local path ({leak})"
                )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_every_nbval_marker_is_followed_by_a_one_line_reason(path):
    nb = nbformat.read(path, as_version=4)
    for index, cell in enumerate(code_cells(nb)):
        tags = [t for t in cell.metadata.get("tags", []) if t.startswith("nbval")]
        assert not tags, (
            f"{path.name} cell {index}: use a `# NBVAL_...` comment with a reason, not tags"
        )
        lines = cell.source.splitlines()
        for i, line in enumerate(lines):
            if line.strip().lstrip("# ").strip() in NBVAL_MARKERS:
                reason = lines[i + 1].strip() if i + 1 < len(lines) else ""
                assert re.match(r"#\s*\S.{9,}", reason) and "NBVAL" not in reason, (
                    f"{path.name} code cell {index}: `{line.strip()}` must be followed by a "
                    "comment line saying why the output cannot repeat"
                )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_ends_with_what_to_remember(path):
    nb = nbformat.read(path, as_version=4)
    markdown = [c for c in nb.cells if c.cell_type == "markdown"]
    assert markdown and "What to remember" in markdown[-1].source.split("\n", 1)[0], (
        f"{path.name}: the last Markdown cell must start with a 'What to remember' heading"
    )
    assert re.search(r"^\s*[-*] ", markdown[-1].source, re.M), "'What to remember' must be a list"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_every_number_glued_into_the_prose_is_glued_by_the_same_notebook(path):
    nb = nbformat.read(path, as_version=4)
    prose = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    used = set(re.findall(r"\{glue(?::\w+)?\}`([^`:<]+?)(?::[^`]*)?`", prose))
    used |= set(re.findall(r":::?\{glue(?::\w+)?\}\s+(\S+)", prose))
    glued = set()
    for cell in code_cells(nb):
        for output in cell.outputs:
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                glued.add(name)
    missing = sorted(used - glued)
    assert not missing, f"{path.name}: prose uses glue names no cell glued: {missing}"


def _significant_digits_shown(value: float, spec: str) -> int:
    """How many significant digits ``format(value, spec)`` shows (myst-nb's glue:text)."""
    match = re.fullmatch(r"[^.]*?(?:\.(\d+))?([eEfFgG%n,d]?)", spec)
    if not match or value == 0 or not math.isfinite(value):
        return 0
    places, kind = int(match.group(1) or 0), match.group(2)
    if kind in "eE" and kind:
        return places + 1
    if kind in ("g", "G"):
        return places or 6
    magnitude = math.floor(math.log10(abs(value * (100 if kind == "%" else 1)))) + 1
    shown = magnitude + (places if kind in ("f", "F", "%") else 0)
    if kind in ("", ",", "n", "d") and not match.group(1):
        shown = len(repr(value).split("e")[0].replace("-", "").replace(".", "").strip("0"))
    return max(shown, 1)


def _stored_significant_digits(value: float) -> int:
    mantissa = repr(value).split("e")[0].replace("-", "").replace(".", "")
    return len(mantissa.strip("0")) or 1


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_no_prose_number_shows_more_digits_than_its_notebook_stored(path):
    """A glued float keeps GLUE_DIGITS significant digits (more when the chapter asks):
    a role that formats it with more would show digits that were never compared."""
    from specdec_lib.course.notebook import GLUE_DIGITS

    nb = nbformat.read(path, as_version=4)
    stored = {}
    for cell in code_cells(nb):
        for output in cell.outputs:
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            text = next((v for k, v in output.get("data", {}).items() if "text/plain" in k), None)
            if name and text is not None:
                stored[name] = text
    prose = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    too_precise = []
    for name, spec in re.findall(r"\{glue(?::text)?\}`([^`:<]+?):([^`]*)`", prose):
        try:
            value = ast.literal_eval(stored.get(name, "None"))
        except (ValueError, SyntaxError):
            continue
        if not isinstance(value, float):
            continue
        allowed = max(GLUE_DIGITS, _stored_significant_digits(value))
        if _significant_digits_shown(value, spec) > allowed:
            too_precise.append(f"{name}:{spec} shows {format(value, spec)} from {value!r}")
    assert not too_precise, f"{path.name}: {too_precise}"


def test_every_nbval_sanitize_pattern_is_read_and_compiles():
    from nbval.plugin import get_sanitize_patterns

    text = (ROOT / "tests" / "nbval_sanitize.cfg").read_text(encoding="utf-8")
    pairs = get_sanitize_patterns(text)
    declared = [line for line in text.splitlines() if line.startswith("regex:")]
    assert len(pairs) == len(declared), "a `regex:` line without a `replace: ...` line is ignored"
    for regex, _ in pairs:
        re.compile(regex)


# --- what a reader sees ----------------------------------------------------------------------

_SOLUTION = re.compile(r"^(:{3,}|`{3,})\{solution(?:-start)?\}[^\n]*\n((?::[^\n]*\n)*)", re.M)


def _markdown_sources() -> list[tuple[str, str]]:
    sources = [(p.name, p.read_text(encoding="utf-8")) for p in sorted(CHAPTERS.glob("*.md"))]
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        sources += [(path.name, c.source) for c in nb.cells if c.cell_type == "markdown"]
    return sources


def test_every_solution_is_folded_on_the_site():
    unfolded = [
        f"{name}: {m.group(0).splitlines()[0]}"
        for name, text in _markdown_sources()
        for m in _SOLUTION.finditer(text + "\n")
        if ":class: dropdown" not in m.group(2)
    ]
    assert not unfolded, f"give these solutions ':class: dropdown': {unfolded}"


@pytest.mark.parametrize(
    "phrase", ["known gap", "issue 2", "the course sets a bar", "course goal", "does not copy yet"]
)
def test_no_chapter_speaks_of_project_internals(phrase):
    found = [name for name, text in _markdown_sources() if phrase in text.lower()]
    assert not found, f"{phrase!r} is project-internal language, found in {found}"


# --- numbering of exercises and theorems ------------------------------------------------


def test_every_chapter_numbers_its_exercises_and_theorems_with_its_own_number():
    # scripts/book_numbering.py prefixes each chapter's numbers (Exercise 6.2) with the
    # number its file name gives; two chapters with one number would read as one.
    numbers = {}
    for entry in toc_files():
        stem = entry.removesuffix(".ipynb").removesuffix(".md")
        notebook = (ROOT / f"{stem}.ipynb").is_file()
        number = book_numbering.chapter_number(stem)
        assert (number is not None) == notebook, f"{entry}: chapter number {number!r}"
        if notebook:
            numbers[stem] = number
    assert len(set(numbers.values())) == len(numbers), numbers
    assert book_numbering.chapter_number("chapters/07b_bugs_from_the_wild") == "7b"
    assert book_numbering.chapter_number("chapters/appendix_a_training_tinygpt") == "A"


def _labels(text: str) -> set[str]:
    return set(re.findall(r"^:label:\s*(\S+)", text, flags=re.MULTILINE))


def _cited(text: str) -> set[str]:
    roles = re.findall(r"\{(?:prf:ref|ref|numref)\}`([^`]+)`", text)
    return {m.group(1) if (m := re.search(r"<([^>]+)>$", r)) else r for r in roles}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_no_chapter_cites_an_example_on_the_pages_about_the_course(path):
    # The how-to page's theorem and exercise are examples of the layout: a chapter that
    # cites one sends the reader to the how-to page instead of the course's own result.
    examples = set()
    for page in CHAPTERS.glob("*.md"):
        examples |= _labels(page.read_text(encoding="utf-8"))
    nb = nbformat.read(path, as_version=4)
    prose = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    cited = sorted(_cited(prose) & examples)
    assert not cited, f"{path.name} cites examples from chapters/*.md: {cited}"
