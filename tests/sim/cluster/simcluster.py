# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers for the simulated-cluster tests (sim/cluster/simctl.py, docker exec into the nodes).

The clusters are containers on this machine's Docker engine (sim/README.md); these tests contact
only them and loopback. They need root and build the images on first use (a couple of minutes
cold, seconds warm).
"""

from __future__ import annotations

import datetime
import json
import os
import secrets
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SIMCTL = REPO / "sim" / "cluster" / "simctl.py"
sys.path.insert(0, str(REPO / "tools" / "awx"))
import runner_job  # noqa: E402 - tools/awx is not a package


def simctl(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run sim/cluster/simctl.py, echoing its output (visible with pytest -s or on failure)."""
    proc = subprocess.run(
        [sys.executable, str(SIMCTL), *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    return proc


def describe(cluster: str) -> dict:
    return json.loads(simctl("describe", cluster).stdout)


def ansible_bin(name: str) -> str:
    venv = REPO / ".venv" / "bin" / name
    if venv.exists():
        return str(venv)
    found = shutil.which(name)
    if not found:
        pytest.fail(f"{name} not found: run make venv first")
    return found


def node_sh(host: str, script: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["docker", "exec", host, "sh", "-c", script], capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"{host}: {script!r} failed ({proc.returncode}): {proc.stderr or proc.stdout}")
    return proc


def node_links(host: str) -> dict[str, dict]:
    """The node's network interfaces (ip -d -j link), by name."""
    return {link["ifname"]: link for link in json.loads(node_sh(host, "ip -d -j link show").stdout)}


def node_addresses(host: str) -> dict[str, list[dict]]:
    return {i["ifname"]: i.get("addr_info", []) for i in json.loads(node_sh(host, "ip -j addr show").stdout)}


def start_cluster(cluster: str, *extra: str):
    if os.geteuid() != 0:
        pytest.fail("the simulated cluster needs root (it starts containers and moves links between namespaces)")
    proc = simctl("up", cluster, *extra)
    if proc.returncode != 0:
        simctl("down", cluster)
        pytest.fail(f"make sim-up CLUSTER={cluster} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return describe(cluster)


def ansible_on(cluster: str, command: str, *args: str, timeout: float = 600, env: dict | None = None):
    """``command`` (ansible, ansible-playbook) on inventories/<cluster>, from the repository root."""
    return subprocess.run(
        [ansible_bin(command), *args, "-i", f"inventories/{cluster}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )


def rank_containers(host: str, name: str = "vllm_dsv41") -> dict[str, str]:
    """The node's containers of that name with their state (docker ps -a inside the node)."""
    out = node_sh(host, f"docker ps -a --filter name=^/{name}$ --format '{{{{.Names}}}} {{{{.State}}}}'").stdout
    return dict(line.split(maxsplit=1) for line in out.splitlines() if line.strip())


RANK_RECORDS = "/var/log/dgxspark-cluster/ranks"


def rank_records(host: str) -> list[dict]:
    """The records the stop and the boot's undo keep on a node of the ranks they removed, oldest first."""
    script = (
        "import glob, json, os; paths = sorted(glob.glob('" + RANK_RECORDS + "/*.json'), key=os.path.getmtime); "
        "print(json.dumps([json.load(open(p)) for p in paths]))"
    )
    return json.loads(node_sh(host, f'python3 -c "{script}"').stdout)


def started_at(host: str, name: str = "vllm_dsv41") -> float:
    """Docker's own StartedAt of a node's container, in seconds since the epoch (Go's RFC 3339 with up to
    nine fraction digits, trailing zeros dropped: compared as numbers, not as strings)."""
    text = node_sh(host, f"docker inspect -f '{{{{.State.StartedAt}}}}' {name}").stdout.strip()
    whole, _dot, fraction = text.rstrip("Z").partition(".")
    seconds = datetime.datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.UTC)
    return seconds.timestamp() + float(f"0.{fraction or 0}")


def guard_phase(host: str) -> dict:
    """The memory guard's state file on the node (phase, tripped, ...)."""
    return json.loads(node_sh(host, "cat /run/dgxspark-memguard/state.json").stdout)


def http_json(url: str, body: dict | None = None, timeout: float = 30) -> dict:
    """GET (or POST ``body`` as JSON) from this machine; the parsed answer."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return json.loads(answer.read())


def boot_serve_and_stop(cluster: str, info: dict, while_serving: Callable[[], None] | None = None) -> None:
    """boot.yml on the cluster, the head's API answering from this machine, ``while_serving()`` (more checks
    of the serving cluster), then stop.yml leaving no rank."""
    profile = json.loads((REPO / "inventories" / cluster / "serving-profile.json").read_text(encoding="utf-8"))
    nodes = info["nodes"]
    head = nodes[0]["management_address"]
    boot = ansible_on(cluster, "ansible-playbook", "playbooks/boot.yml")
    assert boot.returncode == 0, boot.stdout[-8000:] + boot.stderr[-3000:]
    flat = " ".join(boot.stdout.split())
    assert f"endpoint: http://{head}:8000/v1 serving {profile['model']}" in flat, boot.stdout[-4000:]
    ranks = "; ".join(f"{n['rank']} {n['host']} running" for n in nodes)
    assert f"ranks: {ranks}" in flat, boot.stdout[-4000:]
    assert "memory guard: steady on every node" in flat
    for node in nodes:
        assert rank_containers(node["host"]) == {"vllm_dsv41": "running"}, node["host"]
        assert guard_phase(node["host"])["phase"] == "steady", node["host"]
    models = http_json(f"http://{head}:8000/v1/models")
    assert [m["id"] for m in models["data"]] == [profile["model"]]
    done = http_json(
        f"http://{head}:8000/v1/completions",
        {"model": profile["model"], "prompt": "Count from 1 to 5:", "max_tokens": 16},
    )
    assert done["choices"][0]["text"].strip() == "1, 2, 3, 4, 5", done
    if while_serving is not None:
        while_serving()
    stop = ansible_on(cluster, "ansible-playbook", "playbooks/stop.yml")
    assert stop.returncode == 0, stop.stdout[-6000:] + stop.stderr[-3000:]
    assert f"rank 0 ({nodes[0]['host']}): stopped, exited, exit code" in " ".join(stop.stdout.split())
    for node in nodes:
        assert rank_containers(node["host"]) == {}, node["host"]  # removed: a boot afterwards just works
        assert rank_records(node["host"]), node["host"]  # its exit code and log tail are kept
        assert guard_phase(node["host"])["phase"] == "idle", node["host"]
    try:
        urllib.request.urlopen(f"http://{head}:8000/health", timeout=5).close()
    except OSError as error:  # refused: nothing listens there any more
        assert "refused" in str(error).lower(), error
    else:
        raise AssertionError(f"{cluster}: the head still answers after stop.yml")


def ee_image() -> str:
    """The execution environment's image as `make ee-image` leaves it (built only when its inputs changed)."""
    make = ["make", "--no-print-directory", "ee-image"]
    proc = subprocess.run(make, cwd=REPO, capture_output=True, text=True, timeout=1800, check=False)
    if proc.returncode != 0:
        pytest.fail(f"make ee-image failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    current = (REPO / ".cache" / "ee" / "current.env").read_text().split()
    return dict(line.split("=", 1) for line in current)["EE_IMAGE"]


def memguard_key(cluster: str) -> str:
    """The guards' shared key that runs from the checkout keep in inventories/<cluster>/.dgxspark-memguard.key
    (ansible.builtin.password's format), or a new one. An AWX job has a fresh private data directory each time:
    it takes the key as an extra variable, memguard_peer_key, from a credential (docs/security.md)."""
    path = REPO / "inventories" / cluster / ".dgxspark-memguard.key"
    if path.is_file():
        return path.read_text(encoding="utf-8").split(" salt=")[0].strip()
    return secrets.token_hex(16)


def awx_job(info: dict, template: str, path: Path, image: str, ident: str, timeout: float = 1200) -> runner_job.Job:
    """A launch of an AWX job template (awx/resources.yml) on the cluster ``info`` describes, the way AWX launches
    it (tools/awx/runner_job.py): ansible-runner in the EE's ``image`` on the cluster's management network, its
    inventory of awx/resources.yml, the survey's defaults, the cluster's key as the machine credential and the
    guards' key as a credential's extra variable; in the private data directory ``path``."""
    return runner_job.launch(
        template,
        info["cluster"],
        Path(info["ssh_key"]),
        path,
        image=image,
        network=info["management_network"],
        extra_vars={"memguard_peer_key": memguard_key(info["cluster"])},
        ident=ident,
        timeout=timeout,
    )
