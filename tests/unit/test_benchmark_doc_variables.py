# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/benchmark.md lists every dgxspark_bench_* variable bench.yml reads, with its default (issue 29: the
per-level settings were only in the playbook's header comment)."""

from __future__ import annotations

import ast
import re

import yaml

from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT


def _read_by_bench() -> dict[str, list[str]]:
    """Each dgxspark_bench_* variable bench.yml reads (not a task's registered result), to its `| default(...)`s."""
    text = (ROOT / "playbooks" / "bench.yml").read_text()
    tasks = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    registered = set(re.findall(r"^\s*register:\s*(\w+)", tasks, re.M))
    names = {n for n in re.findall(r"\b(dgxspark_bench_[a-z_]+)\b(?!:)", tasks) if n not in registered}
    return {name: re.findall(rf"\b{name}\s*\|\s*default\(([^()]*(?:\([^()]*\))?[^()]*)\)", tasks) for name in names}


def _doc_rows() -> dict[str, str]:
    text = (ROOT / "docs" / "benchmark.md").read_text()
    return dict(re.findall(r"^\| `(dgxspark_bench_[a-z_]+)` \| ([^|]+) \|", text, re.M))


def test_every_variable_bench_yml_reads_is_in_the_doc_with_its_default() -> None:
    read = _read_by_bench()
    rows = _doc_rows()
    assert len(read) > 20, sorted(read)
    missing = sorted(set(read) - set(rows))
    assert not missing, f"docs/benchmark.md has no row for {missing}"
    unknown = sorted(set(rows) - set(read))
    assert not unknown, f"docs/benchmark.md lists variables bench.yml does not read: {unknown}"
    wrong = []
    for name, defaults in read.items():
        for default in defaults:
            try:
                value = ast.literal_eval(default.replace("true", "True").replace("false", "False"))
            except (ValueError, SyntaxError):
                continue  # computed: said in words
            said = rows[name].strip().strip("`")
            if yaml.safe_load(said) != value:
                wrong.append(f"{name}: bench.yml falls back to {value!r}, the doc says {rows[name].strip()}")
    assert not wrong, wrong


def test_the_spec_and_the_doc_agree_on_the_literal_defaults() -> None:
    spec = yaml.safe_load((ROOT / "awx" / "playbook_argument_specs.yml").read_text())["argument_specs"]["bench"]
    rows = _doc_rows()
    for name, option in spec["options"].items():
        if name.startswith("dgxspark_bench_") and option.get("default") not in (None, ""):
            assert yaml.safe_load(rows[name].strip().strip("`")) == option["default"], name
