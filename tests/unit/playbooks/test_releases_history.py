# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``releases.yml -e releases_history=DIR``, run for real on a head that is this machine (a local connection, the
releases in a temporary folder): the release module's ``history`` reads every release with its evidence, the
``bench_history`` action writes DIR/history.md and DIR/charts/history-*.png from the runs on this controller, one
of them missing; in check mode it says what it holds and writes nothing."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

from ansible_collections.dgxspark.cluster.plugins.module_utils import _releases
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench.report import charts_missing
from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT, SPARK3
from ansible_collections.dgxspark.cluster.tests.unit.plugins.plugin_utils.test__bench_history import (
    CHART_FILES,
    PNG_SIGNATURE,
    three_releases,
)

BIN = pathlib.Path(sys.executable).parent


def _head(tmp_path: pathlib.Path) -> tuple[str, str]:
    """An inventory whose head is this machine, and its releases' folder holding :func:`three_releases`."""
    directory = tmp_path / "releases"
    for record in three_releases(tmp_path):
        hosts = ("spark-head",)
        record.update(
            schema_version=_releases.SCHEMA_VERSION,
            spec_sha256=dict.fromkeys(hosts, f"spec-{record['id']}"),
            images=dict.fromkeys(hosts, "sha256:" + "1" * 64),
        )
        record["profile"]["text"] = "{}"
        _releases.write(str(directory), record, exclusive=True)
    inventory = {
        "dgxspark": {
            "children": {
                "dgxspark_head": {"hosts": {"spark-head": {}}},
                "dgxspark_workers": {"hosts": {}},
            },
            "vars": {
                "ansible_connection": "local",
                "ansible_python_interpreter": sys.executable,
                "dgxspark_profile": str(SPARK3),
            },
        }
    }
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(inventory))
    return str(path), str(directory)


def _run(inventory: str, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [str(BIN / "ansible-playbook"), "playbooks/releases.yml", "-i", inventory, *extra]
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, check=False, timeout=300)


@pytest.mark.skipif(charts_missing() is not None, reason="matplotlib is not installed")
def test_the_history_is_written_from_the_releases_on_the_head(tmp_path: pathlib.Path) -> None:
    inventory, directory = _head(tmp_path)
    out = tmp_path / "history"
    # ansible_become false: the releases' folder is the test's own, not root's
    common = ["-e", f"boot_releases_dir={directory}", "-e", "ansible_become=false"]
    run = _run(inventory, *common, "-e", f"releases_history={out}", "--check")
    text = run.stdout + run.stderr
    assert run.returncode == 0, text[-3000:]
    assert "3 release(s), 5 run(s) named in their evidence, 4 with figures, at C=8" in text, text[-3000:]
    assert "check mode: " in text and not out.exists()

    run = _run(inventory, *common, "-e", f"releases_history={out}")
    text = " ".join((run.stdout + run.stderr).split())
    assert run.returncode == 0, text[-3000:]
    assert f"history: {out}/history.md" in text
    assert "charts: " + ", ".join(f"charts/{name}" for name in CHART_FILES) in text
    assert "missing, a run of r20261203T100000Z-000000000002" in text
    assert "[WARNING]" not in text
    for name in CHART_FILES:
        assert (out / "charts" / name).read_bytes().startswith(PNG_SIGNATURE)
    report = (out / "history.md").read_text()
    assert "### r20261203T100000Z-000000000002: **promoted**" in report
    assert json.loads(json.dumps(report))  # text, written whole


def test_without_it_nothing_is_written(tmp_path: pathlib.Path) -> None:
    inventory, directory = _head(tmp_path)
    run = _run(inventory, "-e", f"boot_releases_dir={directory}", "-e", "ansible_become=false")
    text = run.stdout + run.stderr
    assert run.returncode == 0, text[-3000:]
    assert "promoted: r20261203T100000Z-000000000002" in text
    assert "Write the benchmark history" in text and "skipping: [spark-head]" in text
