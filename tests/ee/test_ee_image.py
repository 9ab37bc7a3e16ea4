"""The execution environment's image (make ee-image) against what the EE must hold, each check run inside it.

Run in .venv-builder: make ee-check (which builds the image first, cached). EE_IMAGE names the image (the make
target passes the one .cache/ee/current.env names); without it, that file says which; without either, skipped.
Every container here runs with no network.

- ansible-core, ansible-runner and every Python package of the lock (requirements/constraints-ee-py313.txt) at
  its pin, `pip check` clean; dumb-init as the entrypoint's init; nothing of the offline build left behind (its
  /etc/pip.conf, /output).
- The collections in /usr/share/ansible/collections: dgxspark.cluster at galaxy.yml's version and the
  collections it depends on, each within the range its dependant declares, nothing else.
- `ansible-playbook --syntax-check` of every job template's playbook (awx/resources.yml), in the image, on the
  checkout mounted read-only, with the collections path AWX gives a job: what the playbooks name is found in the
  image's install.
- An ansible-runner job as AWX launches one (tools/awx/runner_job.py: the private data directory with the
  project, the inventory script, the survey's defaults as extra variables and a machine credential's key) of
  plan.yml, which contacts no node: status successful, the events as AWX shows them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "awx"))
import runner_job  # noqa: E402 - tools/awx is not a package

GALAXY = yaml.safe_load((ROOT / "galaxy.yml").read_text())
EE_LOCK = ROOT / "requirements" / "constraints-ee-py313.txt"
CURRENT = ROOT / ".cache" / "ee" / "current.env"
COLLECTIONS = "/usr/share/ansible/collections"


def _image() -> str:
    if os.environ.get("EE_IMAGE"):
        return os.environ["EE_IMAGE"]
    if CURRENT.is_file():
        return dict(line.split("=", 1) for line in CURRENT.read_text().split())["EE_IMAGE"]
    return ""


IMAGE = _image()
pytestmark = pytest.mark.skipif(not IMAGE, reason="no EE image named (EE_IMAGE, .cache/ee/current.env): make ee-check")


def in_image(*argv: str, volumes: tuple[str, ...] = (), env: dict[str, str] | None = None) -> str:
    """`argv` in a throw-away container of the image, as its entrypoint starts it, with no network; its stdout."""
    options = [arg for volume in volumes for arg in ("--volume", volume)]
    options += [arg for key, value in (env or {}).items() for arg in ("--env", f"{key}={value}")]
    proc = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", *options, IMAGE, *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, f"{argv} in {IMAGE}: {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


def _pins() -> dict[str, str]:
    """name -> version of the EE's lock, whose pins carry hashes on continuation lines (`name==version \\`, then
    `--hash=sha256:...`)."""
    pins = {}
    for line in EE_LOCK.read_text().replace("\\\n", " ").splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split()[0].split("==")
            pins[canonicalize_name(name)] = version
    return pins


def test_the_image_is_the_one_built_and_is_an_execution_environment() -> None:
    inspected = subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True, text=True, check=False)
    assert inspected.returncode == 0, f"{IMAGE} is not built: make ee-image"
    config = json.loads(inspected.stdout)[0]["Config"]
    assert config["Labels"]["ansible-execution-environment"] == "true"
    assert config["Labels"]["org.dgxspark-ee.inputs"] == IMAGE.rsplit(":", 1)[1]
    assert config["Entrypoint"] == ["/opt/builder/bin/entrypoint", "dumb-init"]
    assert config["User"] == "1000" and config["WorkingDir"] == "/runner"


def test_ansible_core_runner_and_every_pinned_package_at_its_pin() -> None:
    pins = _pins()
    out = in_image("bash", "-c", "ansible --version; ansible-runner --version; python3 --version; dumb-init --version")
    assert f"ansible [core {pins['ansible-core']}]" in out, out
    assert re.search(rf"^{re.escape(pins['ansible-runner'])}$", out, re.M), out
    assert re.search(r"^Python 3\.13\.\d+$", out, re.M), out
    installed = {
        canonicalize_name(p["name"]): p["version"]
        for p in json.loads(in_image("python3", "-m", "pip", "list", "--format", "json"))
    }
    assert {name: installed.get(name) for name in pins} == pins
    assert installed["dumb-init"] == "1.2.5"
    assert "No broken requirements found." in in_image("python3", "-m", "pip", "check")


def test_nothing_of_the_offline_build_is_left() -> None:
    """The build's pip configuration (no index, the wheels) and its /output are gone: pip in the image is plain."""
    out = in_image("bash", "-c", "ls -d /etc/pip.conf /output 2>&1; python3 -m pip config list; echo end")
    assert out.count("No such file or directory") == 2 and out.endswith("end\n"), out
    assert "no-index" not in out and "find-links" not in out


def test_the_collections_are_dgxspark_cluster_and_what_it_depends_on() -> None:
    listed = json.loads(in_image("ansible-galaxy", "collection", "list", "--format", "json"))
    assert list(listed) == [f"{COLLECTIONS}/ansible_collections"], listed
    script = (
        "import glob, json; print(json.dumps([json.load(open(p))['collection_info'] for p in "
        f"sorted(glob.glob('{COLLECTIONS}/ansible_collections/*/*/MANIFEST.json'))]))"
    )
    infos = {f"{i['namespace']}.{i['name']}": i for i in json.loads(in_image("python3", "-c", script))}
    own = infos.pop(f"{GALAXY['namespace']}.{GALAXY['name']}")
    assert own["version"] == GALAXY["version"] and own["dependencies"] == GALAXY["dependencies"]
    needed = set()
    for info in [own, *infos.values()]:
        for name, declared in (info.get("dependencies") or {}).items():
            assert name in infos, f"{info['name']} needs {name}, which the image lacks"
            assert infos[name]["version"] in SpecifierSet(declared.replace("*", "")), (name, declared)
            needed.add(name)
    assert set(infos) == needed, f"in the image but needed by nothing: {sorted(set(infos) - needed)}"


def test_the_templates_playbooks_pass_the_syntax_check_in_the_image() -> None:
    """The checkout read-only at /project; ANSIBLE_COLLECTIONS_PATH as AWX sets it for a job (the project's own
    .ansible link, which names the checkout, is not in a project AWX checks out: here the image's path wins)."""
    resources = yaml.safe_load((ROOT / "awx/resources.yml").read_text())
    playbooks = sorted({template["playbook"] for template in resources["job_templates"]})
    assert "playbooks/preflight.yml" in playbooks and "playbooks/boot.yml" in playbooks
    out = in_image(
        "bash",
        "-c",
        'cd /project && ansible-playbook --syntax-check -i inventories/sim3/hosts.yml "$@"',
        "syntax-check",
        *playbooks,
        volumes=(f"{ROOT}:/project:ro",),
        env={"ANSIBLE_COLLECTIONS_PATH": COLLECTIONS, "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false"},
    )
    assert out.count("playbook: playbooks/") == len(playbooks), out


@pytest.fixture(scope="module")
def plan_job(tmp_path_factory: pytest.TempPathFactory) -> runner_job.Job:
    """plan.yml (controller only) through ansible-runner in the image, from a private data directory made for the
    preflight template's launch on the sim3 inventory, with a throw-away key as the machine credential."""
    tmp = tmp_path_factory.mktemp("ee-job")
    key = tmp / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ee-test", "-f", str(key)], check=True)
    pdd = runner_job.private_data_dir(tmp / "pdd", runner_job.template("dgxspark preflight"), "sim3", key)
    return runner_job.run(pdd, "playbooks/plan.yml", image=IMAGE, network="none", timeout=300)


def test_an_ansible_runner_job_runs_in_the_image_as_awx_launches_it(plan_job: runner_job.Job) -> None:
    job = plan_job
    assert (job.status, job.rc) == ("successful", 0), job.stdout()[-6000:]
    stats = job.stats()
    # the plan, the plan shown, the rules sim3 waives listed (its two guard waivers), each rank's command
    assert stats["failures"] == {} and stats["dark"] == {} and stats["ok"] == {"sim3-head": 4}, stats
    (validated,) = job.of("runner_on_ok", "Validate the profile and render every rank")
    result: dict[str, Any] = validated["event_data"]["res"]
    assert result["plan"]["shape"] == "tp3-triangle" and result["plan"]["nodes"] == 3
    # the inventory script's group variables, the survey's defaults and the credential's key all reached the run
    assert result["src"] == "/runner/project/inventories/sim3/serving-profile.json"
    extravars = json.loads((job.private_data_dir / "env" / "extravars").read_text())
    assert extravars["boot_timeout"] == 900 and extravars["awx_job_template_name"] == "dgxspark preflight"
    command = json.loads((job.private_data_dir / "artifacts" / job.ident / "command").read_text())
    assert command["command"][0] == "ssh-agent" and "ssh-add" in command["command"][-1]
    assert "ansible-playbook -u root -i /runner/inventory -e @/runner/env/extravars" in command["command"][-1]
    assert command["env"]["ANSIBLE_COLLECTIONS_PATH"].endswith(":/usr/share/ansible/collections")
    # what AWX's job output shows first: the credential's key taken by the ssh-agent, then the playbook
    assert job.events[0]["event"] == "verbose", job.events[0]
    assert job.events[0]["stdout"] == f"Identity added: /runner/artifacts/{job.ident}/ssh_key_data (ee-test)"
    assert [e["event"] for e in job.events][1:3] == ["playbook_on_start", "playbook_on_play_start"]
    assert "PLAY RECAP" in job.stdout()
