# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/weights.yml on sim3 (issue 30): the head's weights put on the workers over the fabric, checked on
arrival; a worker missing shards, a truncated shard, a transfer killed halfway, a full target, --check and a second
run. The model directory is generated on the nodes (the same seeded bytes wherever it is written), under a path of
its own named by a copy of the sim3 profile; the fabric is configured first (prepare.yml)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest
from simcluster import REPO, ansible_bin, node_sh

HOSTS = ("sim3-head", "sim3-worker1", "sim3-worker2")
ROOT = "/srv/dgxspark-weights-test"
WEIGHTS = f"{ROOT}/model"
MIB = 1024 * 1024
# name: size (bytes); seeded content, the same on every node that writes it
FILES = {
    "config.json": 2_000,
    "tokenizer.json": 300_000,
    **{f"extra/part-{i:02d}.bin": 40_000 + i for i in range(12)},
    "model-00001-of-00003.safetensors": 24 * MIB,
    "model-00002-of-00003.safetensors": 20 * MIB + 7,
    "model-00003-of-00003.safetensors": 16 * MIB,
}
BIG = "model-00004-of-00004.safetensors"

WRITE = """
import hashlib, json, os, sys
root, files = sys.argv[1], json.loads(sys.argv[2])
for name, size in files.items():
    path = os.path.join(root, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    seed = hashlib.sha256(name.encode()).digest()
    block = (seed * (65536 // 32))
    with open(path, "wb") as out:
        left = size
        n = 0
        while left > 0:
            piece = hashlib.sha256(seed + n.to_bytes(8, "big")).digest() + block[32:]
            out.write(piece[:left])
            left -= min(left, len(piece))
            n += 1
"""


def write_files(host: str, files: dict[str, int]) -> None:
    node_sh(host, f"python3 -c {shlex.quote(WRITE)} {WEIGHTS} {shlex.quote(json.dumps(files))}")


def sha(host: str, name: str) -> str:
    return node_sh(host, f"sha256sum {WEIGHTS}/{name} 2>/dev/null | cut -c1-64", check=False).stdout.strip()


def playbook(profile: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [ansible_bin("ansible-playbook"), "playbooks/weights.yml", "-i", "inventories/sim3",
         "-e", f"dgxspark_profile={profile}", "-e", "weights_progress_every=1", *args],
        cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    return flat(proc)


def flat(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """The output with the callback's line wrapping undone (every run of white space one space), the recap kept."""
    recaps = [line for line in proc.stdout.splitlines() if line.split(" ", 1)[0] in HOSTS and "ok=" in line]
    proc.stdout = " ".join(proc.stdout.split()) + "\n" + "\n".join(recaps)
    proc.stderr = " ".join(proc.stderr.split())
    return proc


def descendants(pid: int) -> list[int]:
    """Every process started by ``pid``, and by those, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, queue = [], [pid]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


def recap(proc: subprocess.CompletedProcess) -> dict[str, dict[str, int]]:
    found = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if parts and parts[0] in HOSTS and ":" in parts:
            found[parts[0]] = {k: int(v) for k, v in (p.split("=") for p in parts[2:] if "=" in p)}
    return found


def said(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"


@pytest.fixture(scope="module")
def weights_sim3(sim3, tmp_path_factory):
    """sim3 with its fabric configured, a profile naming the test's weights path, the head holding the model."""
    proc = subprocess.run(
        [ansible_bin("ansible-playbook"), "playbooks/prepare.yml", "-i", "inventories/sim3"],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, said(proc)
    profile = json.loads((REPO / "inventories" / "sim3" / "serving-profile.json").read_text())
    profile["host"]["weights_path"] = WEIGHTS
    path = tmp_path_factory.mktemp("weights") / "profile.json"
    path.write_text(json.dumps(profile))
    for host in HOSTS:
        node_sh(host, f"umount {ROOT} 2>/dev/null; rm -rf {ROOT} /var/cache/dgxspark-cluster; mkdir -p {WEIGHTS}")
    write_files("sim3-head", FILES)
    yield path
    for host in HOSTS:
        node_sh(host, f"umount {ROOT} 2>/dev/null; rm -rf {ROOT}", check=False)


def test_a_worker_missing_shards_gets_them_and_weights_identity_passes(weights_sim3):
    write_files("sim3-worker1", {k: v for k, v in FILES.items() if not k.startswith("model-")})
    write_files("sim3-worker2", FILES)
    proc = playbook(weights_sim3)
    assert proc.returncode == 0, said(proc)
    assert "sim3-worker1 (10.99.3.2, fabric): gets 3 of 17 files" in proc.stdout, said(proc)
    assert "sim3-worker2 (10.99.3.3, fabric): matches sim3-head" in proc.stdout, said(proc)
    assert "sim3-worker1: 3 file(s) from sim3-head" in proc.stdout and "each SHA-256 checked" in proc.stdout
    assert "ETA" in proc.stdout, said(proc)
    assert recap(proc)["sim3-worker1"]["changed"] == 1 and recap(proc)["sim3-worker2"]["changed"] == 0
    for name in FILES:
        assert sha("sim3-worker1", name) == sha("sim3-head", name), name
    # the cache was refreshed on arrival (what the preflight reads: it hashes nothing that arrived)
    pre = flat(subprocess.run(
        [ansible_bin("ansible-playbook"), "playbooks/preflight.yml", "-i", "inventories/sim3",
         "-e", f"dgxspark_profile={weights_sim3}"],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    ))  # fmt: skip
    for host in HOSTS:
        assert f"PASS weights-identity {host}" in pre.stdout, said(pre)


def test_a_truncated_shard_is_found_and_replaced(weights_sim3):
    name = "model-00002-of-00003.safetensors"
    node_sh("sim3-worker2", f"truncate -s 5000000 {WEIGHTS}/{name}")
    proc = playbook(weights_sim3)
    assert proc.returncode == 0, said(proc)
    assert f"{name} (truncated: 5,000,000 of 20,971,527 bytes)" in proc.stdout, said(proc)
    assert sha("sim3-worker2", name) == sha("sim3-head", name)


def test_check_mode_moves_nothing(weights_sim3):
    node_sh("sim3-worker1", f"rm {WEIGHTS}/config.json")
    proc = playbook(weights_sim3, "--check")
    assert proc.returncode == 0, said(proc)
    assert "sim3-worker1: would receive 1 file(s)" in proc.stdout, said(proc)
    assert sha("sim3-worker1", "config.json") == ""
    proc = playbook(weights_sim3)
    assert proc.returncode == 0, said(proc)
    assert sha("sim3-worker1", "config.json") == sha("sim3-head", "config.json")


def test_the_second_run_moves_nothing(weights_sim3):
    first = playbook(weights_sim3)
    assert first.returncode == 0, said(first)
    second = playbook(weights_sim3)
    assert second.returncode == 0, said(second)
    assert "every node (2) matches sim3-head: nothing moves" in second.stdout, said(second)
    assert all(counts["changed"] == 0 for counts in recap(second).values()), said(second)


def test_a_transfer_killed_halfway_resumes(weights_sim3):
    write_files("sim3-head", {BIG: 400 * MIB})
    process = subprocess.Popen(
        [ansible_bin("ansible-playbook"), "playbooks/weights.yml", "-i", "inventories/sim3",
         "-e", f"dgxspark_profile={weights_sim3}", "-e", "weights_hash_seconds=120"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    partial = f"{WEIGHTS}/.dgxspark-partial/{BIG}"
    size = 0
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and process.poll() is None:
            got = node_sh("sim3-worker1", f"stat -c %s {partial} 2>/dev/null", check=False).stdout.strip()
            size = int(got or 0)
            if size > 60 * MIB:
                break
            time.sleep(0.2)
    finally:
        # the controller dies, every process of it (Ansible's workers run in sessions of their own, and so do the
        # ssh processes of each end): the nodes see their connections close
        for pid in [process.pid, *descendants(process.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        process.wait(30)
    assert 0 < size < 400 * MIB, f"the partial copy held {size} bytes when the controller was killed"
    time.sleep(3)
    kept = int(node_sh("sim3-worker1", f"stat -c %s {partial}").stdout.strip())
    assert 60 * MIB <= kept < 400 * MIB, kept
    assert sha("sim3-worker1", BIG) == ""
    proc = playbook(weights_sim3, "-e", "weights_hash_seconds=120")
    assert proc.returncode == 0, said(proc)
    assert f"sim3-worker1: sim3-head -> sim3-worker1: {BIG}: resumed at" in proc.stdout, said(proc)
    assert sha("sim3-worker1", BIG) == sha("sim3-head", BIG) == sha("sim3-worker2", BIG)


def test_a_full_target_is_refused_before_anything_moves(weights_sim3):
    node_sh("sim3-worker1", f"rm {WEIGHTS}/tokenizer.json")
    node_sh("sim3-worker2", f"mount -t tmpfs -o size=8m tmpfs {ROOT} && mkdir -p {WEIGHTS}")
    try:
        write_files("sim3-worker2", {"config.json": FILES["config.json"]})
        proc = playbook(weights_sim3)
        assert proc.returncode != 0, said(proc)
        assert "weights.yml: nothing was moved:" in proc.stdout + proc.stderr, said(proc)
        assert "sim3-worker2: not enough free space under" in proc.stdout + proc.stderr, said(proc)
        assert sha("sim3-worker1", "tokenizer.json") == "", "worker1 got a file although the plan was refused"
    finally:
        node_sh("sim3-worker2", f"umount {ROOT}", check=False)


def test_the_model_cache_view(weights_sim3):
    assert playbook(weights_sim3).returncode == 0
    node_sh("sim3-worker2", f"rm {WEIGHTS}/config.json")
    proc = playbook(weights_sim3, "-e", "weights_report=true")
    assert proc.returncode == 0, said(proc)
    assert f"sim3-head: {WEIGHTS}, " in proc.stdout and "; the source; " in proc.stdout, said(proc)
    assert "sim3-worker1: " in proc.stdout and "matches sim3-head (SHA-256);" in proc.stdout, said(proc)
    assert "sim3-worker2: " in proc.stdout and "DIFFERS from sim3-head: 1 file(s)" in proc.stdout, said(proc)
    assert " free" in proc.stdout
    assert sha("sim3-worker2", "config.json") == "", "the view moved a file"
    assert all(counts["changed"] == 0 for counts in recap(proc).values()), said(proc)
