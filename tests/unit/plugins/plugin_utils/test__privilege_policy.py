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
    DANGEROUS_CAPABILITIES,
    DOCKER_RUN_OPTIONS,
    NEEDED_CAPABILITIES,
    PRIVILEGE_CHECKS,
    privilege_policy,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import validate_profile
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.schema import WAIVABLE_CHECKS
from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT, SPARK3, SPARK8

SEED_ARGS = len(json.loads(SPARK3.read_text())["container"]["docker_run_args"])

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
    "etc writable": (["--volume=/etc:/host-etc"], "host-mounts", "/etc of the host is bound writable"),
    "etc subdir writable": (["--volume=/etc/systemd/system:/x:rw"], "host-mounts", "bound writable"),
    "proc writable": (["--volume=/proc:/host-proc:rw"], "host-mounts", "/proc of the host is bound writable"),
    "sys by --mount": (["--mount=type=bind,source=/sys,target=/hsys"], "host-mounts", "/sys of the host is bound"),
    "sys by --mount, read-only at the top only": (
        ["--mount=type=bind,source=/sys,target=/hsys,readonly,bind-recursive=writable"],
        "host-mounts",
        "/sys of the host is bound writable into the rank (read-only at the top only: bind-recursive=writable",
    ),
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
    "dev mem": (["--device=/dev/mem"], "dangerous-devices", "--device /dev/mem gives the rank the node's physical"),
    "dev kmem": (["--device=/dev/kmem:/dev/kmem:rw"], "dangerous-devices", "physical memory"),
    "dev port": (["--device=/dev/port"], "dangerous-devices", "I/O ports"),
    "a disk": (["--device=/dev/nvme0n1"], "dangerous-devices", "the node's disks (a block device)"),
    "a partition": (["--device=/dev/sda1:/dev/xvda"], "dangerous-devices", "block device"),
    "a mapper device": (["--device=/dev/mapper/root"], "dangerous-devices", "block device"),
    "all of /dev": (["--device=/dev"], "dangerous-devices", "block device"),
    "a cgroup rule for every device": (["--device-cgroup-rule=a *:* rwm"], "dangerous-devices", "every device"),
    "a cgroup rule for block devices": (["--device-cgroup-rule=b 8:* rwm"], "dangerous-devices", "block devices"),
    "apparmor": (["--security-opt=apparmor=unconfined"], "apparmor-unconfined", "apparmor=unconfined lifts"),
    "apparmor, colon": (["--security-opt", "apparmor:unconfined"], "apparmor-unconfined", "AppArmor profile"),
}


def validate(extra: list[str], waivers: dict[str, str] | None = None, data: dict[str, Any] | None = None) -> Any:
    data = data or json.loads(SPARK3.read_text())
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
        ["--cap-add=IPC_LOCK", "--cap-add=SYS_NICE", "--cap-add=CAP_SYS_NICE"],
        ["--volume=/etc/hosts:/etc/hosts:ro", "--volume=/sys/class/infiniband:/sys/class/infiniband:ro"],
        ["--volume=/scratch:/scratch", "--volume=cache:/root/.cache", "--volume=/data"],
        ["--mount=type=bind,source=/etc/pki,target=/etc/pki,readonly", "--mount=type=volume,target=/v"],
        ["--device=/dev/infiniband/uverbs0", "--device=/dev/nvidia0", "--device-cgroup-rule=c 231:* rwm"],
        ["--pid=container:other", "--privileged=false", "--security-opt=no-new-privileges"],
    ],
    ids=["needed capabilities", "read-only system files", "binds of data", "mounts", "devices", "the rest"],
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
    data["waivers"] = {"host-mounts": "only the weights rule is tested here"}
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
    assert not set(NEEDED_CAPABILITIES) & set(DANGEROUS_CAPABILITIES)
    assert {name for name, row in DOCKER_RUN_OPTIONS.items() if row.policy} == {
        "--cap-add",
        "--device",
        "--device-cgroup-rule",
        "--mount",
        "--pid",
        "--privileged",
        "--security-opt",
        "--volume",
    }
    text = (ROOT / "docs" / "profile.md").read_text(encoding="utf-8")
    for check in PRIVILEGE_CHECKS:
        assert f"`{check}`" in text, check
    for capability in DANGEROUS_CAPABILITIES:
        assert f"`{capability}`" in text, capability
