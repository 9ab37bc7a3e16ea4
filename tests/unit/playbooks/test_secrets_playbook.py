# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/secrets.yml puts the profile's secrets' files on the nodes from values Ansible Vault or an AWX
credential gives (dgxspark_secret_values), root's and 0600, and shows no value: run for real on this machine, every
"node" a local connection into a temporary directory (the test runs as root, as a node's become would)."""

from __future__ import annotations

import json
import os
import pathlib
import stat
import subprocess
import sys

import pytest
import yaml

from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT, SPARK3

BIN = pathlib.Path(sys.executable).parent
TOKEN = "hf_" + "PlantedBySecretsPlaybook0123456789"
KEY = "api-" + "PlantedKey9876543210"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="writes root's 0600 files as a node's become would")


@pytest.fixture
def cluster(tmp_path: pathlib.Path) -> dict[str, pathlib.Path]:
    """spark3's profile with a secret and an API key file in tmp_path/node/secrets (its host.secrets_dir), its hosts
    local connections."""
    profile = json.loads(SPARK3.read_text())
    profile["host"]["secrets_dir"] = str(tmp_path / "node" / "secrets")
    profile["container"]["secrets"] = {"hf_token": str(tmp_path / "node" / "secrets" / "hf_token")}
    profile["container"]["api"] = {"api_key_file": str(tmp_path / "node" / "secrets" / "vllm_api_key")}
    (tmp_path / "profile.json").write_text(json.dumps(profile))
    hosts = yaml.safe_load((ROOT / "inventories" / "spark3" / "hosts.yml").read_text())
    for group in hosts["dgxspark"]["children"].values():
        for host_vars in group["hosts"].values():
            host_vars.update(ansible_connection="local", ansible_python_interpreter=sys.executable)
    # the test runs as root already: no sudo
    hosts["dgxspark"]["vars"] = {"dgxspark_profile": str(tmp_path / "profile.json"), "ansible_become": False}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(hosts))
    return {
        "root": tmp_path,
        "hf_token": tmp_path / "node/secrets/hf_token",
        "vllm_api_key": tmp_path / "node/secrets/vllm_api_key",
    }


def _run(cluster: dict[str, pathlib.Path], values: object, *extra: str) -> subprocess.CompletedProcess[str]:
    given = cluster["root"] / "values.yml"
    given.write_text(yaml.safe_dump({"dgxspark_secret_values": values}) if values is not None else "{}\n")
    command = [str(BIN / "ansible-playbook"), "playbooks/secrets.yml", "-i", str(cluster["root"] / "hosts.yml")]
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    return subprocess.run(
        [*command, "-e", f"@{given}", *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )


def _recap(run: subprocess.CompletedProcess[str]) -> str:
    return run.stdout[run.stdout.rindex("PLAY RECAP") :]


def test_writes_each_secret_root_s_0600_shows_no_value_and_a_second_run_changes_nothing(cluster) -> None:
    run = _run(cluster, {"hf_token": TOKEN, "vllm_api_key": KEY}, "--diff")
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    assert TOKEN not in out and KEY not in out
    for name, value in (("hf_token", TOKEN), ("vllm_api_key", KEY)):
        path = cluster[name]
        assert path.read_text() == value
        info = path.stat()
        assert stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == 0, name
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700, name
    flat = " ".join(run.stdout.split())
    assert f"hf_token ({cluster['hf_token']})" in flat and f"vllm_api_key ({cluster['vllm_api_key']})" in flat
    again = _run(cluster, {"hf_token": TOKEN, "vllm_api_key": KEY}, "--diff")
    assert again.returncode == 0 and _recap(again).count("changed=0") == 3, _recap(again)
    assert "unchanged" in again.stdout and TOKEN not in again.stdout + again.stderr


def test_check_mode_with_a_new_value_writes_nothing_and_shows_nothing(cluster) -> None:
    assert _run(cluster, {"hf_token": TOKEN}).returncode == 0
    new = TOKEN + "NEW"
    check = _run(cluster, {"hf_token": new}, "--check", "--diff")
    assert check.returncode == 0, check.stdout[-3000:]
    assert new not in check.stdout + check.stderr and TOKEN not in check.stdout + check.stderr
    assert "written" in check.stdout  # what would be written
    assert cluster["hf_token"].read_text() == TOKEN


def test_an_existing_directory_is_left_as_it_is(cluster) -> None:
    cluster["hf_token"].parent.mkdir(parents=True)
    cluster["hf_token"].parent.chmod(0o755)
    assert _run(cluster, {"hf_token": TOKEN}).returncode == 0
    assert stat.S_IMODE(cluster["hf_token"].parent.stat().st_mode) == 0o755
    assert stat.S_IMODE(cluster["hf_token"].stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("values", "said"),
    [
        (
            {"hf_token": TOKEN, "hf_tokn": TOKEN},
            "not secrets of the profile: hf_tokn (its secrets: hf_token, vllm_api_key)",
        ),
        ({"hf_token": ["a", "list"]}, "values that are not text: hf_token"),
        (None, "give dgxspark_secret_values"),
    ],
)
def test_a_value_for_no_secret_of_the_profile_is_refused_and_nothing_is_written(cluster, values, said) -> None:
    run = _run(cluster, values)
    out = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0 and said in out and "nothing was written" in out, out[-3000:]
    assert TOKEN not in out
    assert not (cluster["root"] / "node").exists()


def test_an_empty_value_is_no_value_and_leaves_the_file_as_it_is(cluster) -> None:
    """A credential's field left blank gives an empty value: that secret is not written (nor emptied)."""
    assert _run(cluster, {"hf_token": TOKEN}).returncode == 0
    run = _run(cluster, {"hf_token": "", "vllm_api_key": KEY})
    assert run.returncode == 0, run.stdout[-3000:]
    assert cluster["hf_token"].read_text() == TOKEN and cluster["vllm_api_key"].read_text() == KEY
    assert "hf_token (" not in run.stdout
