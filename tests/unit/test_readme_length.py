# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The README stays a five-minute read (issue 25): at most 1,500 words, its first commands the two that do all
set-up (`make demo`, `make test`), a link to every doc, and every relative link in it and in docs/*.md points at a
file that exists (and, into a Markdown file, at a heading that exists)."""

from __future__ import annotations

import pathlib
import re
import unicodedata

import pytest

from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT

README = ROOT / "README.md"
MAX_WORDS = 1500
LINKED = [README, *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")


def test_at_most_1500_words() -> None:
    words = len(README.read_text(encoding="utf-8").split())  # as `wc -w` counts them
    assert words <= MAX_WORDS, f"README.md has {words} words (at most {MAX_WORDS}): move the detail into docs/"


def test_the_first_commands_are_the_two_set_up_commands() -> None:
    """Nothing but the title before the first code block, and that block is `make demo` then `make test`."""
    lines = README.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if FENCE.match(line))
    assert [line for line in lines[:start] if line.strip()] == ["# dgxspark.cluster"], lines[:start]
    assert lines[start].strip() in ("```sh", "```bash", "```console"), lines[start]
    end = next(i for i in range(start + 1, len(lines)) if FENCE.match(lines[i]))
    commands = [" ".join(line.split("#", 1)[0].split()) for line in lines[start + 1 : end]]
    assert [command for command in commands if command] == ["make demo", "make test"], lines[start:end]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation gone, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.lstrip("#"))  # a link's text
    text = text.strip().lower()
    text = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return text.replace(" ", "-")


def _outside_code(path: pathlib.Path) -> list[str]:
    """The file's lines outside fenced code blocks, with inline code spans blanked."""
    kept, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            kept.append(re.sub(r"(`+)(.+?)\1", "", line))
    return kept


def _headings(path: pathlib.Path) -> list[str]:
    """The headings outside fenced code blocks, as written (code spans kept: GitHub keeps their text)."""
    headings, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            headings.append(line)
    return headings


def _anchors(path: pathlib.Path) -> set[str]:
    anchors: set[str] = set()
    for line in _headings(path):
        slug = _slug(line)
        number = 0
        candidate = slug
        while candidate in anchors:
            number += 1
            candidate = f"{slug}-{number}"
        anchors.add(candidate)
    return anchors


def _links(path: pathlib.Path) -> list[str]:
    return [target for line in _outside_code(path) for target in LINK.findall(line)]


def test_the_readme_links_every_doc() -> None:
    """Its table of docs has a row for each of docs/*.md."""
    linked = set(_links(README))
    missing = [doc.name for doc in sorted((ROOT / "docs").glob("*.md")) if f"docs/{doc.name}" not in linked]
    assert not missing, f"README.md's table of docs lacks {missing}"


def test_the_link_pattern_finds_links() -> None:
    assert "docs/security.md" in _links(README)
    assert "../roles/boot/README.md" in _links(ROOT / "docs" / "overview.md")
    assert _slug("### `playbooks/recover.yml`") == "playbooksrecoveryml"
    assert _slug("## 2. The execution environment") == "2-the-execution-environment"
    assert _slug("## Install from Galaxy (or a built tarball)") == "install-from-galaxy-or-a-built-tarball"


@pytest.mark.parametrize("path", LINKED, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_resolves(path: pathlib.Path) -> None:
    broken = []
    for target in _links(path):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file_part, _hash, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.relative_to(ROOT)}")
    assert not broken, f"{path.relative_to(ROOT)}: {broken}"
