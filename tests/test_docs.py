"""The documentation: the MkDocs site builds with warnings as errors, the README stays short, and
every ``promptsearch`` command shown in the README or the site is one the command line accepts."""

from __future__ import annotations

import re
import shlex
import sys

import pytest
from conftest import REPO, run_child

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def shown_commands(text: str) -> list[str]:
    """``promptsearch …`` command lines inside fenced code blocks (continuations joined, comments and
    a leading ``$ `` or ``… && `` dropped)."""
    out = []
    for block in re.findall(r"```(?:bash|sh|console|text)\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            line = re.sub(r"^\$ ", "", line)
            for part in re.split(r"\s*(?:&&|;|\|)\s*", line):
                if part.startswith("promptsearch "):
                    out.append(re.sub(r"\s*&$", "", part))
    return out


def _argv(command: str) -> list[str]:
    words = shlex.split(command, comments=True)
    return [w for w in words[1:] if w != "…"]


def test_readme_is_a_short_entry():
    assert len((REPO / "README.md").read_text().splitlines()) <= 250


def test_the_site_home_page_is_the_readme():
    """docs/index.md is the README with its links made relative to docs/ (a repository file named in
    the README is plain text on the site)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    want = re.sub(r"\[(`[^`]+`)\]\((?!https?:)[^)]*\.(?:lock|toml|sh|py)\)", r"\1", readme.replace("](docs/", "]("))
    assert (REPO / "docs" / "index.md").read_text(encoding="utf-8") == want, \
        "docs/index.md differs from README.md: copy the README there with links made relative to docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_command_shown_is_accepted_by_the_parser(page):
    from promptsearch.cli.parser import build_parser

    commands = shown_commands(page.read_text(encoding="utf-8"))
    bad = []
    for c in commands:
        try:
            build_parser().parse_args(_argv(c))
        except SystemExit:
            bad.append(c)
    assert not bad, "commands the CLI refuses:\n" + "\n".join(bad)


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    pytest.importorskip("mkdocs", reason="MkDocs is a --dev dependency (bash scripts/setup.sh --dev)")
    r = run_child([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", tmp_path / "site",
                   "--config-file", REPO / "mkdocs.yml"], {"NO_MKDOCS_2_WARNING": "1"}, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "WARNING" not in r.stderr
    api = (tmp_path / "site" / "reference" / "search" / "index.html").read_text()
    assert "Scorer" in api and "Runner" in api  # the reference is generated from the docstrings


def test_docstrings_name_things_plainly_not_by_sphinx_roles():
    """mkdocstrings shows a sphinx role (:class:`~a.B`) as literal text on the site: names are written ``B``."""
    role = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|data|exc|obj|const):`")
    pkg = REPO / "promptsearch"
    found = [f"{p.relative_to(pkg)}:{i}" for p in sorted(pkg.rglob("*.py"))
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if role.search(line)]
    assert not found, found[:10]
