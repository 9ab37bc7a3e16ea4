# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/awx.md stays true to awx/resources.yml: every template, workflow, schedule, credential and execution
environment it names by its AWX name is the file's (or one it says is made by hand), the schedules' rrules and the
EE's image are the file's, its short version (the README's AWX section until issue 25) says the three steps, and
the README links it."""

from __future__ import annotations

import re

import yaml

from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT

DOC = (ROOT / "docs" / "awx.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")
RESOURCES = yaml.safe_load((ROOT / "awx" / "resources.yml").read_text(encoding="utf-8"))
# what docs/awx.md has a team make by hand (not in the file: they hold secrets, or are the team's choice)
BY_HAND = {"dgxspark memory guard key", "dgxspark sim3 guard key", "dgxspark on-call", "dgxspark ranks secrets"}
BY_HAND |= {f"dgxspark {team}" for team in ("operators", "platform admins", "sim3 team")}


def _named() -> set[str]:
    names = {t["name"] for t in RESOURCES["job_templates"]}
    names |= {w["name"] for w in RESOURCES["workflow_job_templates"]}
    names |= {s["name"] for s in RESOURCES["schedules"]}
    names |= {e["name"] for e in RESOURCES["execution_environments"]}
    for template in RESOURCES["job_templates"]:
        names |= {c["name"] for c in template["related"]["credentials"]}
    return names


def test_every_name_the_doc_gives_is_in_the_file() -> None:
    """Backticked or quoted AWX names (`dgxspark boot (fleet sim3)`, 'dgxspark sim3 machine'), placeholders aside."""
    found = set(re.findall(r"[`'\"](dgxspark[ .][^`'\"<>\n]*?)[`'\"]", DOC))
    found = {name for name in found if not name.startswith(("dgxspark.cluster.", "dgxspark-")) and "$" not in name}
    found -= {"dgxspark.cluster"}  # the project and the collection
    unknown = sorted(found - _named() - BY_HAND)
    assert not unknown, f"docs/awx.md names what awx/resources.yml does not have: {unknown}"
    assert len(found & _named()) > 20, "the pattern finds the doc's names"


def test_the_docs_schedules_are_the_files() -> None:
    rules = {s["name"]: s["rrule"] for s in RESOURCES["schedules"]}
    rows = re.findall(r"^\| `(dgxspark [^`]+)` \| `dgxspark [^`]+` \| `(DTSTART[^`]+)` \|", DOC, re.M)
    assert rows, "the doc's schedule table"
    for name, rrule in rows:
        assert rules[name] == rrule, name
    assert all(not s["enabled"] for s in RESOURCES["schedules"]) and "imported disabled" in DOC


def test_the_docs_execution_environment_is_the_files() -> None:
    (ee,) = RESOURCES["execution_environments"]
    assert f"image `{ee['image']}`, pull `{ee['pull']}`" in DOC
    assert f"`{ee['name']}`" in DOC


def test_the_short_version_says_import_build_launch_and_the_readme_links_the_doc() -> None:
    section = DOC[DOC.index("## In short") : DOC.index("## 1. Import the resources")]
    assert "[docs/awx.md](docs/awx.md)" in README
    for step in (
        "awx import -f yaml < awx/resources.yml",
        "make ee-image",
        "awx job_templates launch 'dgxspark preflight'",
    ):
        assert step in section, step
    assert "awx import -f yaml < awx/resources.yml" in DOC
