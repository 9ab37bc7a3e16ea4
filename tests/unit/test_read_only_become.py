# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read-only checks run without ``become`` where they can (issue 15, docs/security.md "Privilege on the nodes").

Every task of playbooks/*.yml and roles/*/tasks|handlers/*.yml that only reads (a module on the list below, a
``release`` that lists or shows, a command declared ``changed_when: false``) runs as the login: its ``become``,
its block's or its play's, is not true. The read-only tasks that need root are listed by file and name in
``NEEDS_ROOT``, each with why (a root-only socket or file); an entry that no longer names such a task fails too,
so the list stays the truth. A ``become`` given as a template (true on some nodes only) counts as asking for root.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from ansible.playbook.block import Block
from ansible.playbook.handler import Handler
from ansible.playbook.play import Play
from ansible.playbook.task import Task

from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT

# Modules that read and change nothing, wherever they run.
READ_ONLY_MODULES = {
    "dgxspark.cluster.node_facts",
    "dgxspark.cluster.fabric_verify",
    "dgxspark.cluster.bench_monitor",
    "dgxspark.cluster.rank_health",
    "dgxspark.cluster.wait_serving",
    "dgxspark.cluster.smoke_completion",
    "community.docker.docker_container_info",
    "community.docker.docker_image_info",
    "community.docker.docker_host_info",
    "ansible.builtin.stat",
    "ansible.builtin.find",
    "ansible.builtin.slurp",
    "ansible.builtin.async_status",
    "ansible.builtin.setup",
    "ansible.builtin.service_facts",
    "ansible.builtin.package_facts",
}
# Modules that read with some arguments only: the argument, its default and its read-only values.
READ_ONLY_WHEN = {"dgxspark.cluster.release": ("operation", "list", {"list", "show", "history"})}
COMMANDS = {"ansible.builtin.command", "ansible.builtin.shell"}

DOCKER = "the Docker engine's socket (root's; the login is not in the docker group)"
RELEASES = "the releases directory on the head (root's, 0700)"
NEEDS_ROOT = {
    ("playbooks/bench.yml", "Read this rank's container (one round trip)"): DOCKER,
    ("playbooks/images.yml", "Read every node's images (the head's releases too), one round trip each"): (
        f"{DOCKER}; {RELEASES}"
    ),
    ("playbooks/promote.yml", "Read the releases on the head"): RELEASES,
    ("playbooks/weights.yml", "Read every node's weights manifest and free space, one round trip each"): (
        "the weights' hash cache (root's): as the login it is not trusted, and every file is hashed again"
    ),
    ("playbooks/promote.yml", "Read the promoted release whole"): RELEASES,
    (
        "playbooks/recover.yml",
        "Read every node's rank containers, its memory guard and (the head) the releases, in one round trip each",
    ): f"{DOCKER}; the rank records and the boot journal (root's, 0700/0600); {RELEASES}",
    ("playbooks/recover.yml", "Read the promoted release, whole"): RELEASES,
    ("playbooks/releases.yml", "Read the releases on the head"): RELEASES,
    ("playbooks/releases.yml", "Read every release with its evidence, for the benchmark history"): RELEASES,
    (
        "playbooks/status.yml",
        "Read each node's ranks, guard, GPUs and weights' disk; the head's releases and API (one round trip each)",
    ): f"{DOCKER}; the rank records (root's, 0700); {RELEASES}; the API key file (root's, 0600) when the API has one",
    ("playbooks/rollback.yml", "Read the releases on the head"): RELEASES,
    ("playbooks/rollback.yml", "Read what the head's rank runs (its spec label)"): DOCKER,
    ("playbooks/rollback.yml", "Read the release to roll back to, whole"): RELEASES,
    (
        "playbooks/window.yml",
        "Read every node's GPUs, containers, images, Docker runtimes and memory guard, and the head's releases (one "
        "round trip each)",
    ): f"{DOCKER}; {RELEASES}",
    (
        "playbooks/window.yml",
        "Read the promoted release whole, its profile booted again after the job (the head)",
    ): RELEASES,
    ("roles/boot/tasks/preflight.yml", "Gather node facts (one round trip per node)"): (
        f"{DOCKER}; {RELEASES}; the rank records and the boot journal (root's, 0700/0600); the secrets' files "
        "(stat of root's 0600 files); the guard's configuration (0600); the weights' hash cache (root's)"
    ),
    ("roles/boot/tasks/wait.yml", "Wait for the head to serve, stopping when any rank is gone"): (
        f"{DOCKER} (every rank's container looked at); the API's key file (root's, 0600)"
    ),
    (
        "roles/boot/tasks/wait.yml",
        "Ask for a smoke completion (its answer must match boot_smoke_expect; a garbled stack fails here)",
    ): "only with container.api's key file or TLS: the key's file and the served certificate (root's, 0600)",
    ("roles/memguard/tasks/status.yml", "Ask the guard for its state"): "the guard's control socket (root's, 0600)",
    ("roles/fabric/tasks/nccl-test.yml", "Run the NCCL bandwidth test from the head"): (
        "the site's own command (fabric_nccl_test_command), opt-in, on real hardware: RDMA memory registration "
        "beyond the login's memlock limit (root has CAP_IPC_LOCK); a command that must run as the login says so "
        "itself (sudo -u)"
    ),
    ("roles/vllm_container/tasks/start.yml", "Look at the rank's container on the node"): DOCKER,
    ("roles/vllm_container/tasks/stop.yml", "Look at the rank's container on the node"): DOCKER,
    (
        "roles/vllm_container/tasks/stop.yml",
        "Confirm it no longer runs (a stop that reports success while the model serves is a known failure)",
    ): DOCKER,
}

KEYWORDS = set(Task.fattributes) | set(Handler.fattributes) | set(Block.fattributes) | {"local_action"}
INCLUDES = {
    "ansible.builtin.include_tasks",
    "ansible.builtin.import_tasks",
    "ansible.builtin.include_role",
    "ansible.builtin.import_role",
}


def module_of(task: dict[str, Any]) -> str:
    names = [key for key in task if key not in KEYWORDS and not key.startswith("with_")]
    assert len(names) == 1, f"not one module in {task.get('name')!r}: {names}"
    return names[0]


def walk(tasks: list[Any] | None, become: Any) -> Iterator[tuple[dict[str, Any], Any]]:
    """Every task with the ``become`` it runs with (its own, else its block's, else the caller's)."""
    for task in tasks or []:
        effective = task.get("become", become)
        if "block" in task:
            for part in ("block", "rescue", "always"):
                yield from walk(task.get(part), effective)
        else:
            yield task, effective


def all_tasks() -> Iterator[tuple[str, dict[str, Any], Any]]:
    """(file, task, become) for every task of the playbooks and of the roles' task and handler files."""
    for path in sorted((ROOT / "playbooks").glob("*.yml")):
        for play in yaml.safe_load(path.read_text(encoding="utf-8")) or []:
            if "import_playbook" in play or "ansible.builtin.import_playbook" in play:
                continue
            for section in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                for task, become in walk(play.get(section), play.get("become")):
                    yield str(path.relative_to(ROOT)), task, become
    for path in sorted([*ROOT.glob("roles/*/tasks/*.yml"), *ROOT.glob("roles/*/handlers/*.yml")]):
        for task, become in walk(yaml.safe_load(path.read_text(encoding="utf-8")), None):
            yield str(path.relative_to(ROOT)), task, become


def read_only(task: dict[str, Any]) -> bool:
    module = module_of(task)
    if module in READ_ONLY_MODULES:
        return True
    if module in READ_ONLY_WHEN:
        argument, default, values = READ_ONLY_WHEN[module]
        value = (task[module] or {}).get(argument, default)
        if isinstance(value, str) and "{{" in value:  # a template: read-only when every value it can give is
            given = set(re.findall(r"'([^']*)'", value))
            return bool(given) and given <= values
        return value in values
    return module in COMMANDS and task.get("changed_when") is False


def asks_for_root(become: Any) -> bool:
    """True, or a template (true on some hosts): anything but absent or false."""
    return become is not None and become is not False


TASKS = list(all_tasks())
READ_ONLY = {(path, task["name"]): become for path, task, become in TASKS if read_only(task)}


def test_the_scan_sees_the_tasks_it_judges() -> None:
    assert len(TASKS) > 200
    modules = {module_of(task) for _path, task, _become in TASKS}
    assert {"dgxspark.cluster.node_facts", "dgxspark.cluster.fabric_verify", "ansible.builtin.stat"} <= modules
    assert len(READ_ONLY) == sum(1 for _path, task, _become in TASKS if read_only(task)), "task names are unique"
    assert ("roles/memguard/tasks/status.yml", "Ask the guard for its state") in READ_ONLY  # changed_when: false


def test_become_is_asked_for_by_the_tasks_themselves() -> None:
    """No play, include or import asks for root: a task's own ``become`` (or its block's) is what it runs with,
    so the scan above sees every task's privilege where it is written."""
    for path in sorted((ROOT / "playbooks").glob("*.yml")):
        for play in yaml.safe_load(path.read_text(encoding="utf-8")) or []:
            if "import_playbook" in play or "ansible.builtin.import_playbook" in play:
                assert "become" not in play, f"{path.name}: {play}"
                continue
            assert set(play) <= set(Play.fattributes), f"{path.name}: play {play.get('name')!r}: {set(play)}"
            assert "become" not in play or play["become"] is False, f"{path.name}: play {play.get('name')!r}"
    for path, task, _become in TASKS:
        if module_of(task) in INCLUDES:
            assert not asks_for_root(task.get("become")), f"{path}: {task['name']!r} passes become to what it includes"


@pytest.mark.parametrize(("path", "name"), sorted(READ_ONLY))
def test_a_read_only_task_runs_without_become_unless_it_needs_root(path: str, name: str) -> None:
    become = READ_ONLY[(path, name)]
    if (path, name) in NEEDS_ROOT:
        assert asks_for_root(become), f"{path}: {name!r} is listed as needing root and runs without become"
    else:
        assert not asks_for_root(become), (
            f"{path}: {name!r} only reads, with become: {become!r}; run it without, or list it in NEEDS_ROOT "
            "with what of root it reads"
        )


def test_every_entry_of_the_list_is_a_read_only_task_with_a_reason() -> None:
    stale = sorted(set(NEEDS_ROOT) - set(READ_ONLY))
    assert stale == [], f"NEEDS_ROOT names what is not a read-only task (renamed or gone): {stale}"
    assert all(reason.strip() for reason in NEEDS_ROOT.values())


@pytest.mark.parametrize(
    ("path", "name"),
    [
        (
            "roles/fabric/tasks/management.yml",
            "Read this node's planned fabric ports and IPv4 default routes (read-only)",
        ),
        ("roles/fabric/tasks/configure.yml", "Find out whether this host uses netplan"),
        ("roles/fabric/tasks/configure.yml", "Compare the live ports with the plan"),
        ("roles/fabric/tasks/verify.yml", "Check every port and ping every peer with do-not-fragment jumbo frames"),
        (
            "roles/kernel/tasks/main.yml",
            "Gather each node's kernel and limits (unless the caller gave them, kernel_node_facts)",
        ),
        ("roles/kernel/tasks/live.yml", "Gather the kernel and limits again"),
        ("roles/kernel/tasks/reboot.yml", "Find update-grub"),
        ("playbooks/bench.yml", "Start the node monitor for the run (MemAvailable, GPU clocks; stopped after the run)"),
    ],
)
def test_these_checks_run_as_the_login(path: str, name: str) -> None:
    """Read-only checks that read nothing of root's (docs/security.md's table), by name: they say so themselves."""
    assert READ_ONLY[(path, name)] is False


# Modules that change a node: each such task asks for root itself (become: true, its own or its block's), since the
# login is not root (the sim's non-root boot runs them as `spark`, with sudo). A task run on the controller
# (delegate_to: localhost, connection: local) writes the operator's files as the operator, and so does not.
CHANGES_A_NODE = {
    "ansible.builtin.copy",
    "ansible.builtin.template",
    "ansible.builtin.file",
    "ansible.builtin.lineinfile",
    "ansible.builtin.systemd_service",
    "ansible.builtin.service",
    "ansible.builtin.reboot",
    "ansible.posix.sysctl",
    "community.docker.docker_container",
    "community.docker.docker_image",
    "dgxspark.cluster.node_phase",
    "dgxspark.cluster.rank_stop",
    "dgxspark.cluster.rank_container",
    "dgxspark.cluster.window_job",
    "dgxspark.cluster.image_stream",
    "dgxspark.cluster.weights_sync",
}


# What changes a node as the login, on purpose: the bench's node monitor runs as the login (become: false above),
# and its stop file is the monitor's own, in the login's directory.
AS_THE_LOGIN = {
    ("playbooks/bench.yml", "Tell the monitor to stop (its stop file)"): "the login's monitor's own stop file",
    (
        "playbooks/bench.yml",
        "Remove the stop file (the monitor leaves it, so that the touch above never races its removal)",
    ): "the login's monitor's own stop file",
}


def on_the_controller(task: dict[str, Any]) -> bool:
    return task.get("delegate_to") in ("localhost", "127.0.0.1") or task.get("connection") == "local"


CHANGING = [
    (path, task["name"], become)
    for path, task, become in TASKS
    if (module_of(task) in CHANGES_A_NODE or (module_of(task) in READ_ONLY_WHEN and not read_only(task)))
    and not on_the_controller(task)
]


def test_the_scan_sees_the_tasks_that_change_nodes() -> None:
    assert len(CHANGING) > 30
    assert set(AS_THE_LOGIN) <= {(path, name) for path, name, _become in CHANGING}, "AS_THE_LOGIN names no such task"
    modules = {module_of(task) for _path, task, _become in TASKS if task["name"] in {n for _p, n, _b in CHANGING}}
    assert {"dgxspark.cluster.node_phase", "ansible.builtin.copy", "ansible.builtin.systemd_service"} <= modules


@pytest.mark.parametrize(("path", "name", "become"), CHANGING, ids=[f"{p}:{n}" for p, n, _b in CHANGING])
def test_a_task_that_changes_a_node_asks_for_root_itself(path: str, name: str, become: Any) -> None:
    """Issue 15: "tasks that need root use become: true at the task or role level"; here, the task (or block)."""
    if (path, name) in AS_THE_LOGIN:
        assert become is False, f"{path}: {name!r} is listed as the login's and asks for {become!r}"
        return
    assert become is True, f"{path}: {name!r} changes a node with become {become!r}"
