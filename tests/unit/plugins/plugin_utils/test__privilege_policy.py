# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The privilege policy: what a rank may not get of its node unless the profile waives it with a reason.

Each case adds options to seed 000's spark3 profile (which passes) and validates it: an error at the
option's JSON path naming the check, and with the check waived, a warning that says why.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.docker_args import (
    DOCKER_RUN_OPTIONS,
    NEEDED_CAPABILITIES,
    PRIVILEGE_CHECKS,
    privilege_policy,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.policy import CAPABILITY_REACH
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import validate_profile
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.schema import WAIVABLE_CHECKS
from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT, SPARK3, SPARK8, spark3_without_weights

# spark3 without its weights' bind: a bind of / would also expose them writable (test_weights_are_bound_read_only)
SEED_ARGS = len(spark3_without_weights()["container"]["docker_run_args"])

# options added -> (check, a fragment of the message)
REFUSED = {
    "privileged": (["--privileged"], "privileged", "--privileged gives the rank every capability"),
    "privileged=true": (["--privileged=true"], "privileged", "every device of the node"),
    "host root": (["-v", "/:/host"], "host-mounts", "/ of the host is bound into the rank"),
    "host root read-only": (["--volume=/:/host:ro"], "host-mounts", "the node's whole filesystem"),
    "host root, path not normal": (["--volume=//./:/host:ro"], "host-mounts", "the node's whole filesystem"),
    "docker socket": (["--volume=/var/run/docker.sock:/var/run/docker.sock"], "host-mounts", "root on the node"),
    "docker socket read-only": (["--volume=/run/docker.sock:/d.sock:ro"], "host-mounts", "a container engine's"),
    "/run": (["--volume=/run:/hostrun:ro"], "host-mounts", "/run of the host is bound"),
    "etc writable": (["--volume=/etc:/host-etc"], "host-mounts", "/etc of the host is bound into the rank"),
    "etc subdir writable": (["--volume=/etc/systemd/system:/x:rw"], "host-mounts", "the system directory /etc"),
    "proc writable": (["--volume=/proc:/host-proc:rw"], "host-mounts", "/proc of the host is bound"),
    "sys by --mount": (["--mount=type=bind,source=/sys,target=/hsys"], "host-mounts", "/sys of the host is bound"),
    "sys by --mount, read-only at the top only": (
        ["--mount=type=bind,source=/sys,target=/hsys,readonly,bind-recursive=writable"],
        "host-mounts",
        "/sys of the host is bound into the rank",
    ),
    # issue 26: the system paths read-only too, and what the old read-only list left out
    "etc read-only": (["--volume=/etc:/host-etc:ro"], "host-mounts", "read-only or not"),
    "etc read-only, short and glued": (["-v/etc:/x:ro"], "host-mounts", "/etc of the host is bound"),
    "etc by --mount=, src": (["--mount=type=bind,src=/etc,dst=/x,ro"], "host-mounts", "/etc of the host"),
    "ssh host key": (["--volume=/etc/ssh/ssh_host_ed25519_key:/k:ro"], "host-mounts", "the system directory /etc"),
    "guard's config": (["--volume=/etc/dgxspark-memguard:/g:ro"], "host-mounts", "the system directory /etc"),
    "proc 1 root read-only": (["--volume=/proc/1/root:/r:ro"], "host-mounts", "the system directory /proc"),
    "proc 1 root, separate": (["--volume", "/proc/1/root:/r"], "host-mounts", "/proc/1/root of the host"),
    "home writable": (["--volume=/home:/h"], "host-mounts", "the system directory /home"),
    "root's ssh": (["--volume=/root/.ssh:/s:ro"], "host-mounts", "the system directory /root"),
    "var run read-only": (["--volume=/var/run:/vr:ro"], "host-mounts", "the system directory /var/run"),
    "var holds var run": (["--volume=/var:/v:ro"], "host-mounts", "it holds the system directory /var/run"),
    "boot": (["--mount=type=bind,source=/boot,target=/b,readonly"], "host-mounts", "the system directory /boot"),
    "usr lib, uppercase options": (
        ["--mount", "type=bind,source=/usr/lib,target=/l,readonly=true"],
        "host-mounts",
        "/usr",
    ),
    "etc through a weights-like path": (
        ["--mount=type=bind,source=/models/../etc,target=/x,readonly"],
        "host-mounts",
        "/etc of the host is bound",
    ),
    "the engine's state": (["--volume=/var/lib/docker/volumes:/v:ro"], "host-mounts", "/var/lib/docker"),
    "guard's socket": (["--volume=/run/dgxspark-memguard:/c:ro"], "host-mounts", "the system directory /run"),
    "a socket bound from elsewhere": (["--volume=/srv/x/docker.sock:/d.sock:ro"], "host-mounts", "engine's socket"),
    "var spool cron": (["--volume=/var/spool/cron:/c"], "bind-sources", "outside the paths a rank may have"),
    "lib systemd": (["--volume=/lib/systemd/system:/s"], "bind-sources", "/lib/systemd/system of the host"),
    "a scratch directory": (["--volume=/scratch:/scratch"], "bind-sources", "host.secrets_dir /etc/dgxspark/secrets"),
    "a volume driver's bind of /": (
        [
            "--mount=type=volume,target=/host,volume-driver=local,volume-opt=type=none,volume-opt=o=bind,"
            "volume-opt=device=/"
        ],
        "volume-drivers",
        "a volume driver's options mount whatever they name",
    ),
    "volume-opt alone": (
        ["--mount=type=volume,src=v,target=/v,volume-opt=device=/etc,volume-opt=o=bind"],
        "volume-drivers",
        "volume-opt=",
    ),
    "--volume-driver": (["--volume-driver=local"], "volume-drivers", "a volume driver mounts whatever"),
    "--volumes-from": (["--volumes-from=other"], "volume-drivers", "another container's mounts"),
    "--volumes-from, separate": (["--volumes-from", "c:ro"], "volume-drivers", "another container's mounts"),
    "root by --mount": (
        ["--mount=type=bind,source=/,target=/host,readonly"],
        "host-mounts",
        "the node's whole filesystem",
    ),
    "systempaths": (["--security-opt=systempaths=unconfined"], "host-mounts", "unmasks the node's kernel files"),
    "pid host": (["--pid=host"], "pid-host", "--pid=host shows the rank every process of the node"),
    "pid host, separate": (["--pid", "host"], "pid-host", "every process of the node"),
    "SYS_ADMIN": (["--cap-add=SYS_ADMIN"], "dangerous-capabilities", "--cap-add=SYS_ADMIN gives the rank mount"),
    "CAP_SYS_MODULE": (["--cap-add=CAP_SYS_MODULE"], "dangerous-capabilities", "loading kernel modules"),
    "sys_ptrace": (["--cap-add=sys_ptrace"], "dangerous-capabilities", "tracing other processes"),
    "SYS_RAWIO": (["--cap-add=SYS_RAWIO"], "dangerous-capabilities", "raw I/O ports"),
    "NET_ADMIN": (["--cap-add=NET_ADMIN"], "dangerous-capabilities", "the node's interfaces, routes"),
    "ALL": (["--cap-add=ALL"], "dangerous-capabilities", "every capability"),
    "all, lower case": (["--cap-add", "all"], "dangerous-capabilities", "every capability"),
    "cap_sys_admin, lower case": (["--cap-add", "cap_sys_admin"], "dangerous-capabilities", "mount, namespaces"),
    "SYS_RESOURCE": (["--cap-add=SYS_RESOURCE"], "dangerous-capabilities", "resource limits"),
    "PERFMON": (["--cap-add=PERFMON"], "dangerous-capabilities", "perf"),
    "AUDIT_CONTROL": (["--cap-add=AUDIT_CONTROL"], "dangerous-capabilities", "audit rules"),
    "LINUX_IMMUTABLE": (["--cap-add=LINUX_IMMUTABLE"], "dangerous-capabilities", "immutable"),
    "a capability no seed needs": (["--cap-add=CAP_WAKE_ALARM"], "dangerous-capabilities", "no seed needs"),
    "dev mem": (["--device=/dev/mem"], "dangerous-devices", "--device /dev/mem gives the rank the node's physical"),
    "dev kmem": (["--device=/dev/kmem:/dev/kmem:rw"], "dangerous-devices", "physical memory"),
    "dev port": (["--device=/dev/port"], "dangerous-devices", "I/O ports"),
    "a disk": (["--device=/dev/nvme0n1"], "dangerous-devices", "the node's disks (a block device)"),
    "a partition": (["--device=/dev/sda1:/dev/xvda"], "dangerous-devices", "block device"),
    "a mapper device": (["--device=/dev/mapper/root"], "dangerous-devices", "block device"),
    "all of /dev": (["--device=/dev"], "dangerous-devices", "block device"),
    "a SCSI generic device": (["--device=/dev/sg0"], "dangerous-devices", "SCSI/NVMe character devices"),
    "an NVMe character device": (["--device=/dev/ng0n1"], "dangerous-devices", "not a device a rank needs"),
    "a terminal": (["--device", "/dev/tty0"], "dangerous-devices", "consoles"),
    "a path through infiniband": (["--device=/dev/infiniband/../mem"], "dangerous-devices", "--device /dev/mem"),
    "a cgroup rule for every device": (["--device-cgroup-rule=a *:* rwm"], "dangerous-devices", "'a *:* rwm'"),
    "a cgroup rule for block devices": (["--device-cgroup-rule=b 8:* rwm"], "dangerous-devices", "open the devices"),
    "a cgroup rule for /dev/mem": (["--device-cgroup-rule=c 1:1 rwm"], "dangerous-devices", "is /dev/mem"),
    "userns host": (["--userns=host"], "host-namespaces", "the node's user namespace"),
    "cgroupns host": (["--cgroupns=host"], "host-namespaces", "the node's cgroup namespace"),
    "uts host, separate": (["--uts", "host"], "host-namespaces", "the node's host name"),
    "oom kill disable": (["--oom-kill-disable"], "oom-protected", "keeps the kernel's OOM killer off the rank"),
    "oom kill disable=true": (["--oom-kill-disable=true"], "oom-protected", "OOM killer"),
    "oom score -1000": (["--oom-score-adj=-1000"], "oom-protected", "--oom-score-adj=-1000"),
    "oom score -1, separate": (["--oom-score-adj", "-1"], "oom-protected", "before the rank"),
    "apparmor": (["--security-opt=apparmor=unconfined"], "apparmor-unconfined", "apparmor=unconfined lifts"),
    "apparmor, colon": (["--security-opt", "apparmor:unconfined"], "apparmor-unconfined", "AppArmor profile"),
}


def validate(extra: list[str], waivers: dict[str, str] | None = None, data: dict[str, Any] | None = None) -> Any:
    data = data or spark3_without_weights()
    data["container"]["docker_run_args"] += extra
    if waivers:
        data["waivers"] = waivers
    return validate_profile(data, "profile.json")


@pytest.mark.parametrize("extra,check,message", REFUSED.values(), ids=REFUSED.keys())
def test_refused_unless_waived(extra: list[str], check: str, message: str) -> None:
    with pytest.raises(ProfileError) as caught:
        validate(extra)
    (problem,) = {p.render(): p for p in caught.value.problems}.values()  # the same for each shape
    assert problem.where == f"$.container.docker_run_args[{SEED_ARGS}]"
    assert message in problem.message, problem.render()
    assert problem.found == " ".join(extra) and problem.expected
    assert f'"{check}": "<why>"' in problem.hint
    profile = validate(extra, {check: "a test of the waiver"})
    assert any(
        w.message.startswith(f"waived {check} (a test of the waiver): ") and message in w.message
        for w in profile.warnings
    ), [w.render() for w in profile.warnings]


@pytest.mark.parametrize(
    "extra",
    [
        ["--cap-add=IPC_LOCK", "--cap-add=SYS_NICE", "--cap-add=CAP_SYS_NICE", "--cap-add=ipc_lock"],
        ["--volume=/etc/dgxspark/secrets/hf_token:/run/secrets/hf:ro", "--volume=cache:/root/.cache", "--volume=/data"],
        ["--mount=type=volume,target=/v", "--mount=type=volume,src=named,dst=/n", "--tmpfs=/scratch:size=1g"],
        ["--device=/dev/infiniband/uverbs0", "--device=/dev/nvidia0", "--device=/dev/nvidia-caps/nvidia-cap1"],
        ["--device=/dev/infiniband/rdma_cm", "--device=/dev/nvidia-uvm", "--device=/dev/nvidiactl"],
        ["--pid=container:other", "--privileged=false", "--security-opt=no-new-privileges", "--cgroupns=private"],
        ["--oom-kill-disable=false", "--oom-score-adj=500", "--oom-score-adj=0"],
    ],
    ids=["needed capabilities", "binds of secrets", "volumes", "devices", "more devices", "namespaces", "oom"],
)
def test_what_ranks_need_passes(extra: list[str]) -> None:
    profile = validate(extra)
    assert not [w for w in profile.warnings if "docker_run_args[1" in w.where], [w.render() for w in profile.warnings]


def test_privileged_no_longer_stands_in_for_ipc_lock_rdma_devices_and_gpus() -> None:
    data = json.loads(SPARK3.read_text())
    data["container"]["docker_run_args"] = [
        a for a in data["container"]["docker_run_args"] if not a.startswith(("--cap-add", "--device", "--gpus"))
    ]
    with pytest.raises(ProfileError) as caught:
        validate(["--privileged"], {"privileged": "a test: privileged, waived"}, data)
    messages = [p.message for p in caught.value.problems]
    assert any("IPC_LOCK capability is missing" in m for m in messages), messages
    assert any("RDMA devices are not passed in" in m for m in messages), messages
    assert any("no --gpus" in m for m in messages), messages


def test_seccomp_unconfined_warns() -> None:
    profile = validate([])
    (warning,) = [w for w in profile.warnings if "seccomp" in w.message]
    assert warning.where == "$.container.docker_run_args[8]"
    assert warning.message.startswith("seccomp=unconfined lifts Docker's system-call filter")


def test_trust_remote_code_warns() -> None:
    data = json.loads(SPARK3.read_text())
    data["container"]["serve_args"] = ["--trust-remote-code"]
    profile = validate_profile(data, "profile.json")
    (warning,) = [w for w in profile.warnings if "remote" in w.message]
    assert warning.where == "$.container.serve_args[0]"
    assert "runs the Python code the model's repository ships" in warning.message


@pytest.mark.parametrize(
    "volume,refused",
    [
        ("--volume=/models:/models:ro", False),  # as spark8 ships it
        ("--volume=/models:/models", True),
        ("--volume=/models:/models:rw", True),
        ("--volume=/models/dsv41:/weights", True),  # inside the weights
        ("--volume=/:/host:ro", False),  # read-only: the weights are safe (host-mounts refuses it)
        ("--volume=/models/../models/x:/w:ro", False),
        ("--mount=type=bind,source=/models/,target=/models", True),
        ("--mount=type=bind,source=/models,target=/models,readonly", False),
        ("--mount=type=bind,source=/models,target=/models,readonly,bind-recursive=readonly", False),
        ("--mount=type=bind,source=/models,target=/models,readonly,bind-recursive=writable", True),  # submounts
        ("--volume=/scratch:/scratch", False),
    ],
)
def test_weights_are_bound_read_only(volume: str, refused: bool) -> None:
    data = json.loads(SPARK8.read_text())
    data["container"]["docker_run_args"] = [a for a in data["container"]["docker_run_args"] if "/models" not in a]
    data["waivers"] = {"host-mounts": "only the weights rule is tested here", "bind-sources": "and not this one"}
    if not refused:
        validate([volume], data=data)
        return
    with pytest.raises(ProfileError) as caught:
        validate([volume], data=data)
    (problem,) = {p.render(): p for p in caught.value.problems}.values()
    assert problem.message.startswith("the weights (host.weights_path /models) are bound writable into the rank")
    assert problem.hint.endswith('"weights-read-only": "<why>"')


def test_the_policy_judges_what_renders() -> None:
    # an option the renderer refuses is its problem, not the policy's
    assert privilege_policy(["--cap-add=SYS ADMIN", "--pid=nonsense", "--privileged=maybe"]) == []


def test_every_check_is_waivable_and_documented() -> None:
    assert set(PRIVILEGE_CHECKS) <= set(WAIVABLE_CHECKS)
    assert not set(NEEDED_CAPABILITIES) & set(CAPABILITY_REACH)
    assert {name for name, row in DOCKER_RUN_OPTIONS.items() if row.policy} == {
        "--cap-add",
        "--cgroupns",
        "--device",
        "--device-cgroup-rule",
        "--mount",
        "--oom-kill-disable",
        "--oom-score-adj",
        "--pid",
        "--privileged",
        "--security-opt",
        "--userns",
        "--uts",
        "--volume",
        "--volume-driver",
        "--volumes-from",
    }
    text = (ROOT / "docs" / "profile.md").read_text(encoding="utf-8")
    for check in PRIVILEGE_CHECKS:
        assert f"`{check}`" in text, check
    for capability in CAPABILITY_REACH:
        assert f"`{capability}`" in text, capability
