# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a new operator tripped over on sim3 (issue 29), tried as they did: a demo's and a window's output with no
FAILED line, no warning and no contradiction; window.yml --check judging the job's GPUs against the nodes (the
sim nodes have neither a GPU nor Docker's NVIDIA runtime, so a GPU job is refused there before serving stops); a
guard tripped by hand through playbooks/trip.yml, read by recover.yml as a memory trip.

The tests run in this order on one sim3 (the module's fixture): the demo boots and benchmarks, the window tests
use the cluster it left serving, and the trip's test stops it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time

from simcluster import REPO, ansible_bin, guard_phase, node_sh, rank_containers

# what a normal run must never print (issue 29, "Misleading lines")
NEVER = (
    "FAILED - RETRYING",
    "[WARNING]",
    "not measured: no node monitor in this run",
    "Using a template for task args is unsafe",
    "Refuse, naming why",
    "a boot would change nothing",
    "by the controller",
)


def playbook(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [ansible_bin("ansible-playbook"), *args, "-i", "inventories/sim3"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "ANSIBLE_NOCOLOR": "1"},
    )


def clean(proc: subprocess.CompletedProcess) -> str:
    """The run's whole output, checked for what a normal run never prints; returned with its spaces folded."""
    out = proc.stdout + proc.stderr
    said = [line for line in NEVER if line in out]
    assert not said, f"a normal run printed {said}:\n{out[-6000:]}"
    assert not re.search(r"\bby  ", out), out[-6000:]  # an empty "by"
    return " ".join(out.split())


def releases() -> list[dict]:
    listing = node_sh("sim3-head", "ls /var/lib/dgxspark-cluster/releases 2>/dev/null || true").stdout.split()
    return [
        json.loads(node_sh("sim3-head", f"cat /var/lib/dgxspark-cluster/releases/{name}").stdout)
        for name in sorted(listing)
        if name.endswith(".json")
    ]


def test_a_demo_prints_no_failed_line_no_warning_and_no_contradiction(sim3, tmp_path):
    proc = playbook("playbooks/demo.yml", "-e", f"dgxspark_bench_dir={tmp_path}")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    flat = clean(proc)
    # the headroom is said once, measured, after the monitors stopped
    assert flat.count("seed 000 Minimum headroom during the long-context test (head node)") == 1, flat[-6000:]
    assert re.search(
        r"Minimum headroom during the long-context test \(head node\): 6\.8 GiB, this run [0-9.]+ GiB", flat
    )
    # who: one way, never empty - the release's creation and the bench's evidence by the same login@host
    shown = playbook("playbooks/releases.yml")
    assert shown.returncode == 0, shown.stdout[-4000:]
    clean(shown)
    (promoted,) = [r for r in releases() if r["state"] == "promoted"]
    evidence = [e for e in promoted["history"] if e.get("event") == "evidence"]
    assert evidence and all(re.fullmatch(r"[^@\s]+@\S+", e["by"]) for e in evidence), promoted["history"]
    assert promoted["by"] == evidence[-1]["by"], (promoted["by"], evidence[-1]["by"])


WINDOW = (
    "-e",
    "window_image=dgxspark-sim/engine:latest",
    "-e",
    "window_name=op",
    "-e",
    '{"window_command": ["sh", "-c", "echo window-job-ran"], "window_progress_s": 2, "window_timeout_s": 120}',
)


def test_window_check_refuses_a_gpu_job_where_it_could_never_start(sim3):
    """The sim nodes have no GPU and no NVIDIA runtime: --check refuses a job given GPUs (the default) there, naming
    both, and an unknown window_gpus; the same job without GPUs may open, and --check's last line says so."""
    refused = playbook("playbooks/window.yml", *WINDOW, "--check")
    flat = " ".join((refused.stdout + refused.stderr).split())
    assert refused.returncode != 0, flat[-4000:]
    assert "sim3-head: no GPU here (nvidia-smi not found)" in flat, flat[-4000:]
    assert "sim3-head: its Docker engine cannot give a container GPUs" in flat
    assert "could not select device driver" in flat and "-e window_gpus=false" in flat
    assert "[WARNING]" not in flat
    for value in ("none", "all", "0"):
        bad = playbook("playbooks/window.yml", *WINDOW, "-e", f"window_gpus={value}", "--check")
        said = " ".join(bad.stdout.split())
        assert bad.returncode != 0 and "window_gpus: true (the job gets every GPU" in said, said[-3000:]
        assert f"found '{value}'" in said
    check = playbook("playbooks/window.yml", *WINDOW, "-e", "window_gpus=false", "--check")
    assert check.returncode == 0, check.stdout[-6000:]
    flat = clean(check)
    # the last line says what a real run would do: stop serving, run the job, boot the release again
    would = (
        "check mode: the window may open. A real run would stop serving on sim3-head, sim3-worker1, sim3-worker2, run "
        "job op (dgxspark-sim/engine:latest) on sim3-head without GPUs, then boot release"
    )
    assert would in flat, flat[-4000:]
    assert flat.rindex(would) > flat.rindex("check mode: the plan and the preflight passed.")
    assert "would be replaced (boot_replace)" in flat
    for node in sim3["nodes"]:
        assert rank_containers(node["host"]) == {"vllm_dsv41": "running"}, node["host"]  # nothing changed


def test_a_window_prints_no_failed_line_no_warning_and_no_contradiction(sim3):
    proc = playbook("playbooks/window.yml", *WINDOW, "-e", "window_gpus=false")
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-3000:]
    flat = clean(proc)
    assert "window-job-ran" in flat and "window: the job succeeded, and the promoted release serves again" in flat
    for node in sim3["nodes"]:
        assert rank_containers(node["host"]) == {"vllm_dsv41": "running"}, node["host"]


def test_a_guard_tripped_by_hand_is_a_memory_trip_for_recover(sim3):
    """playbooks/trip.yml through the guard's control socket: refused without its reason; with it, worker1's guard
    trips, every rank stops (stop-all), recover.yml says memory and refuses, and its override boots again."""
    try:
        assert playbook("playbooks/trip.yml", "--limit", "sim3-worker1").returncode != 0
        for node in sim3["nodes"]:
            assert rank_containers(node["host"]) == {"vllm_dsv41": "running"}, node["host"]
        check = playbook("playbooks/trip.yml", "--limit", "sim3-worker1", "-e", "memguard_trip_reason=drill", "--check")
        said = " ".join(check.stdout.split())
        assert check.returncode == 0 and "would trip the memory guard by hand (by hand: drill)" in said, said[-3000:]
        assert not guard_phase("sim3-worker1").get("tripped")
        tripped = playbook("playbooks/trip.yml", "--limit", "sim3-worker1", "-e", "memguard_trip_reason=drill")
        assert tripped.returncode == 0, tripped.stdout[-4000:]
        assert "by hand: drill" in " ".join(tripped.stdout.split())
        deadline = time.monotonic() + 30
        while any(rank_containers(n["host"]) != {"vllm_dsv41": "exited"} for n in sim3["nodes"]):
            assert time.monotonic() < deadline, "the guards did not stop every rank"
            time.sleep(0.5)
        refused = playbook("playbooks/recover.yml")
        flat = " ".join(refused.stdout.split())
        assert refused.returncode != 0 and "cause: memory - sim3-worker1: memory guard tripped at" in flat, flat[-4000:]
        assert "by hand: drill" in flat
        overridden = playbook("playbooks/recover.yml", "-e", "recover_after_memory_trip=true")
        assert overridden.returncode == 0, overridden.stdout[-6000:]
        for node in sim3["nodes"]:
            assert not guard_phase(node["host"]).get("tripped"), node["host"]
    finally:
        playbook("playbooks/stop.yml")
