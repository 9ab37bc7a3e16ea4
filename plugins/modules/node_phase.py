#!/usr/bin/python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pause or resume a node's helper services and switch its memory guard's phase, in one round trip."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_phase
short_description: Pause or resume a node's helper services and switch its memory guard's phase, in one round trip
version_added: 0.2.0
description:
  - The boot's node-side phase changes, each one round trip, in the runbook's order.
  - With O(helpers_state=stopped) (pause and arm) - stops the helper services that run, reads MemAvailable again
    (judged against O(mem_available_min_gib)), then clears the guard's trip when O(guard_clear) asks for it, then
    switches the guard to O(guard_phase).
  - With O(helpers_state=started) (steady, or the undo) - switches the guard to O(guard_phase) first, then starts
    the helper services that do not run.
  - With O(stop_ranks) (C(stop.yml), one round trip per node) - first stops, and removes, every rank container the
    collection created (found by its label, as C(dgxspark.cluster.rank_stop) does, keeping each one's record),
    then the guard and the helpers as above.
  - Every step runs whatever the one before it did (the undo needs all of them); the module fails at the end
    when any step failed, naming each, with what did happen in the result.
  - The guard is asked through its own command (C(dgxspark-memguard phase), C(clear), C(status)), which answers
    once the daemon applied the switch, between two samples; its state after the switch is returned.
  - The boot's journal on the node (O(journal)) - a pause writes what it pauses, arms and starts there before it
    stops anything; a resume also resumes the helpers an open journal lists (those of a boot whose controller
    died), and removes the journal once every step did its work. A journal left on a node is an interrupted
    boot's - C(dgxspark.cluster.node_facts) reads it (its C(journal) section), and the next boot, C(stop.yml) and
    C(recover.yml) undo it.
author:
  - dgxspark.cluster maintainers (@dgxspark)
options:
  helpers:
    description:
      - The helper services (systemd unit names) to stop or start. Each must be a unit name on the profile's
        allow-list (C(host.helper_services)) - letters, digits, C(_), C(:), C(@), C(.) and C(-), not starting with
        C(-) or C(.), ending in C(.service), C(.timer) or C(.socket); no path, whitespace or glob. The plan checked
        them already; the module checks them again before it calls C(systemctl), and so the helpers a boot
        journal lists.
      - Never a unit the node's running depends on (the module refuses it before anything else) - C(ssh) or
        C(sshd) (the connection), C(docker) or C(containerd) (the ranks), C(dgxspark-memguard) (the guard),
        C(systemd-*), D-Bus, or the network's managers.
    type: list
    elements: str
    default: []
  helpers_state:
    description: V(stopped) pauses the helpers (before the guard's switch), V(started) resumes them (after it).
    type: str
    choices: [stopped, started]
    required: true
  mem_available_min_gib:
    description:
      - With O(helpers_state=stopped), MemAvailable is read again once the helpers stopped (seed 000 pauses them so
        that their memory comes back for the load) and returned as RV(mem_available_bytes); under this floor
        (GiB) the step fails, naming what was found. Left out, it is read and not judged.
    type: float
  guard_phase:
    description: The memory guard's phase to switch to; left out, the guard is not asked.
    type: str
    choices: [idle, startup, steady]
  guard_clear:
    description: Clear the guard's trip before the switch (only when it is tripped).
    type: bool
    default: false
  guard_command:
    description: The guard's command on the node (the memguard role installs it).
    type: path
    default: /usr/local/sbin/dgxspark-memguard
  rank_container:
    description:
      - This node's rank container, looked at once more after the steps (as C(dgxspark.cluster.rank_health)
        looks, without its API), into RV(rank); left out, no rank is looked at.
    type: str
  start_rank:
    description:
      - Start O(rank_container) last, when every step before it did its work - the boot's start phase, one round
        trip per node (pause, arm, start). Only the container the plan created is started - it must carry the
        collection's rank label and O(spec_sha256) as its spec label, under its own name. One that runs already
        is left alone; one that exits right after its start fails the step, with its exit code and log tail in
        RV(rank).
    type: bool
    default: false
  spec_sha256:
    description: The plan's spec hash of the rank that O(start_rank) starts.
    type: str
  stop_ranks:
    description:
      - Stop every rank container the collection created on the node (found by its label, whatever the current
        profile says) before the other steps, as C(dgxspark.cluster.rank_stop) does - its exit code and last log
        lines kept on the node, removed unless O(stop_ranks.remove=false), none left running afterwards (else the
        step fails). Only with O(helpers_state=started) - C(stop.yml)'s one round trip per node, stop then resume.
        Left out, no rank is stopped.
    type: dict
    suboptions:
      remove:
        description: Remove the stopped containers (after their record was saved).
        type: bool
        default: true
      stop_timeout:
        description: Seconds the engine gives a rank between SIGTERM and SIGKILL.
        type: int
        default: 10
      save_dir:
        description: Where each removed rank's record (exit code, last 200 log lines) is kept, 0600. Empty - none.
        type: path
        default: /var/log/dgxspark-cluster/ranks
      log_lines:
        description: How many of each rank's last log lines RV(ranks_stopped) carries.
        type: int
        default: 20
  journal:
    description:
      - The boot's journal on the node (0600 in a 0700 directory). Empty - none is written or read.
    type: path
    default: /var/lib/dgxspark-cluster/boot-journal.json
  journal_by:
    description: Who boots, kept in the journal a pause writes (the controller's user, or the AWX user).
    type: str
    default: ""
  timeout:
    description: Seconds each systemctl call and each question to the guard may take (bounded by coreutils
      C(timeout) where the node has it).
    type: int
    default: 90
extends_documentation_fragment:
  - dgxspark.cluster.docker
attributes:
  check_mode:
    support: full
    description: Reads the helpers' and the guard's state and says what it would change; changes nothing.
  diff_mode:
    support: none
    description: The C(helpers) and C(guard) results say what changed.
  platform:
    description: A node with systemd (and a Docker engine, for O(rank_container)).
seealso:
  - module: dgxspark.cluster.node_facts
  - module: dgxspark.cluster.rank_stop
    description: The same stop of the rank containers, alone.
"""

EXAMPLES = r"""
- name: Pause the helper services that run, then arm the guard's startup phase
  dgxspark.cluster.node_phase:
    helpers: [comfyui.service, ollama.service]
    helpers_state: stopped
    guard_phase: startup

- name: Pause the helpers, arm the guard, then start this node's rank (created as planned) - one round trip
  dgxspark.cluster.node_phase:
    helpers: [comfyui.service]
    helpers_state: stopped
    mem_available_min_gib: 100
    guard_phase: startup
    rank_container: vllm_dsv41
    start_rank: true
    spec_sha256: "{{ boot_rank.spec_sha256 }}"

- name: Stop and remove every rank container, the guard to idle, then resume the helpers - one round trip
  dgxspark.cluster.node_phase:
    helpers_state: started
    guard_phase: idle
    stop_ranks:
      remove: true
  register: stopped

- name: The guard to steady, then resume the helpers, then look at the rank once more
  dgxspark.cluster.node_phase:
    helpers: [comfyui.service]
    helpers_state: started
    guard_phase: steady
    rank_container: vllm_dsv41
  register: steady
"""

RETURN = r"""
helpers:
  description: Each helper's C(ActiveState) before and after the step, by unit name (keys C(before) and C(after)).
  returned: always
  type: dict
guard:
  description: The guard's state after the switch (its C(phase), C(tripped), C(health), ...); null when it was not
    asked or did not answer.
  returned: always
  type: dict
guard_changed:
  description: Whether the guard's phase changed, or a trip was cleared (or would be, in check mode).
  returned: always
  type: bool
mem_available_bytes:
  description: MemAvailable (bytes, C(/proc/meminfo)) after the helpers stopped; null when it could not be read.
  returned: when O(helpers_state=stopped), not in check mode
  type: int
rank:
  description: What C(dgxspark.cluster.rank_health) returns for O(rank_container) (C(running), C(status),
    C(exit_code), C(log_tail), ...), after the other steps.
  returned: when O(rank_container) is given
  type: dict
rank_started:
  description: With O(start_rank), the started container (C(name), C(id), C(running), C(status), C(exit_code),
    C(started_at), C(spec_sha256), C(log_tail)) and whether it was started (C(changed)); null when the step did
    not run (a step before it failed).
  returned: with O(start_rank)
  type: dict
ranks_stopped:
  description:
    - With O(stop_ranks), what C(dgxspark.cluster.rank_stop) returns - C(ranks) (a record each - C(name),
      C(rank), C(was_running), C(status), C(exit_code), C(log_tail), C(saved), C(removed)), C(stopped) and
      C(removed) (names); null when the engine could not be asked (the step's error says why).
  returned: with O(stop_ranks)
  type: dict
journal:
  description:
    - The boot's journal on the node - C(path); C(found), the journal there before this call (null when none);
      C(error), why it could not be read; C(resumed), the helpers a resume started because the journal listed
      them; C(written) (a pause wrote it) and C(closed) (a resume removed it, every step done).
  returned: always
  type: dict
errors:
  description: What failed, a line per step (C(ranks), C(helpers), C(memory), C(guard), C(rank)); empty when every
    step did its work.
  returned: always
  type: list
  elements: str
"""

import json
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgxspark.cluster.plugins.module_utils import _journal
from ansible_collections.dgxspark.cluster.plugins.module_utils._docker_engine import engine_at, stop_wait
from ansible_collections.dgxspark.cluster.plugins.module_utils._docker_module import DOCKER_HOST
from ansible_collections.dgxspark.cluster.plugins.module_utils._procfs import parse_meminfo
from ansible_collections.dgxspark.cluster.plugins.module_utils._rank_health import rank_health
from ansible_collections.dgxspark.cluster.plugins.module_utils._rank_start import RankStartError, start_rank
from ansible_collections.dgxspark.cluster.plugins.module_utils._rank_stop import STOP_OPTIONS, RankStopError, stop_ranks
from ansible_collections.dgxspark.cluster.plugins.module_utils._systemctl import parse_show, show_argv
from ansible_collections.dgxspark.cluster.plugins.module_utils._unit_names import (
    UNIT_NAME_HINT,
    not_unit_names,
    refused_helpers,
)


def refuse_not_unit_names(units: list[str]) -> None:
    """ValueError naming the entries of ``units`` that are not unit names on the collection's allow-list."""
    bad = not_unit_names(units)
    if bad:
        raise ValueError(f"not unit names: {', '.join(repr(u) for u in bad)} (expected {UNIT_NAME_HINT})")


class Node:
    """The node's systemctl and guard command, through the module's run_command."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        seconds = module.params["timeout"]
        bounded = module.get_bin_path("timeout")  # coreutils: a call that hangs is stopped, then killed
        self.prefix = [bounded, "--kill-after=5", str(seconds)] if bounded else []

    def call(self, argv: list[str]) -> tuple[int, str, str]:
        rc, out, err = self.module.run_command(self.prefix + argv)
        if self.prefix and rc in (124, 137):
            return rc, out, f"no answer within {self.module.params['timeout']} s"
        return rc, out, err

    def states(self, units: list[str]) -> dict[str, str | None]:
        refuse_not_unit_names(units)
        binary = self.module.get_bin_path("systemctl", required=True)
        rc, out, err = self.call(show_argv(binary, units))
        if rc != 0:
            raise OSError(f"systemctl show: {err.strip() or 'rc ' + str(rc)}")
        return {unit: state["active_state"] for unit, state in parse_show(out, units).items()}

    def systemctl(self, verb: str, units: list[str]) -> None:
        refuse_not_unit_names(units)
        binary = self.module.get_bin_path("systemctl", required=True)
        rc, _out, err = self.call([binary, verb, "--", *units])
        if rc != 0:
            raise OSError(f"systemctl {verb} {' '.join(units)}: {err.strip() or 'rc ' + str(rc)}")

    def guard(self, *words: str) -> dict:
        argv = [self.module.params["guard_command"], *words]
        rc, out, err = self.call(argv)
        if rc != 0:
            raise OSError(f"the memory guard does not answer ({err.strip() or out.strip() or 'rc ' + str(rc)})")
        try:
            return json.loads(out)
        except ValueError as error:
            raise OSError(f"the memory guard answered what is not JSON: {error}") from None

    def mem_available(self) -> int | None:
        try:
            with open("/proc/meminfo", encoding="ascii") as handle:
                return parse_meminfo(handle.read()).get("MemAvailable")
        except (OSError, ValueError):
            return None

    def rank(self, container: str) -> dict:
        with engine_at(self.module.params["docker_host"], 5.0) as engine:
            return rank_health(engine, container, None)

    def stop(self, remove: bool, stop_timeout: int, save_dir: str | None, log_lines: int) -> dict:
        with engine_at(self.module.params["docker_host"], stop_wait(stop_timeout)) as engine:
            return stop_ranks(
                engine,
                remove=remove,
                stop_timeout=stop_timeout,
                save_dir=save_dir,
                log_lines=log_lines,
                check_mode=self.module.check_mode,
            )

    def start(self, container: str, spec_sha256: str) -> dict:
        with engine_at(self.module.params["docker_host"], float(self.module.params["timeout"])) as engine:
            return start_rank(engine, name=container, spec_sha256=spec_sha256, check_mode=self.module.check_mode)


def run(module: AnsibleModule, node: Node) -> dict:
    params = module.params
    helpers, wanted, phase = list(params["helpers"]), params["helpers_state"], params["guard_phase"]
    result: dict = {"changed": False, "helpers": {}, "guard": None, "guard_changed": False, "errors": []}
    path = params["journal"]
    found, unreadable = _journal.read(path) if path else (None, None)
    journal = {
        "path": path or None,
        "found": found,
        "error": unreadable,
        "resumed": [],
        "written": False,
        "closed": False,
    }
    result["journal"] = journal
    if wanted == "started":
        # what an interrupted boot paused is resumed with the rest; a name off the allow-list never reaches
        # systemctl, and keeps the journal (an error) for someone to look at
        listed = [unit for unit in _journal.helpers(found) if unit not in helpers]
        bad = not_unit_names(listed)
        if bad:
            result["errors"].append(
                f"journal: {path} lists what are not unit names, left out: {', '.join(repr(u) for u in bad)} "
                f"(expected {UNIT_NAME_HINT})"
            )
        journal["resumed"] = [unit for unit in listed if unit not in bad]
        helpers += journal["resumed"]
    elif path and not module.check_mode:
        # written before anything is stopped: a controller that dies from here on leaves it behind
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        rank = params["rank_container"] if params["start_rank"] else None
        try:
            _journal.write(path, _journal.opened(found, now, helpers, phase, rank, params["journal_by"]))
            journal["written"] = True
        except OSError as error:
            result["errors"].append(f"journal: {path}: {error.strerror or error}")
            return result

    def helpers_step() -> None:
        if not helpers:
            return
        try:
            before = node.states(helpers)
            to_change = [u for u, s in before.items() if (s == "active") == (wanted == "stopped")]
            if to_change and not module.check_mode:
                node.systemctl("stop" if wanted == "stopped" else "start", to_change)
                after = node.states(helpers)
            else:
                after = {
                    u: ("inactive" if wanted == "stopped" else "active") if u in to_change else s
                    for u, s in before.items()
                }
            result["helpers"] = {u: {"before": before[u], "after": after[u]} for u in helpers}
            result["changed"] = result["changed"] or bool(to_change)
            still = [u for u in helpers if (after[u] == "active") == (wanted == "stopped")]
            if still and not module.check_mode:
                result["errors"].append(
                    f"helpers: {', '.join(still)} not {wanted} ({', '.join(after[u] or '?' for u in still)})"
                )
        except (OSError, ValueError) as error:
            result["errors"].append(f"helpers: {error}")

    def guard_step() -> None:
        if phase is None and not params["guard_clear"]:
            return
        try:
            if module.check_mode:
                state = node.guard("status")["state"]
                clears = params["guard_clear"] and state.get("tripped") is not None
                would = clears or (phase is not None and state.get("phase") != phase)
                result.update(guard=state, guard_changed=bool(would))
                result["changed"] = result["changed"] or bool(would)
                return
            if params["guard_clear"]:
                state = node.guard("status")["state"]
                if state.get("tripped") is not None:
                    result["guard"] = node.guard("clear")["state"]
                    result.update(guard_changed=True, changed=True)
            if phase is not None:
                answer = node.guard("phase", phase)
                result["guard"] = answer["state"]
                if answer.get("changed"):
                    result.update(guard_changed=True, changed=True)
        except (OSError, KeyError, TypeError) as error:
            result["errors"].append(f"guard: {error}")

    def memory_step() -> None:
        if module.check_mode:
            return
        available = node.mem_available()
        result["mem_available_bytes"] = available
        floor = params.get("mem_available_min_gib")
        if floor is not None and (available is None or available < floor * 1024**3):
            found = "unknown" if available is None else f"{available / 1024**3:.1f} GiB"
            result["errors"].append(
                f"memory: MemAvailable {found} once the helpers stopped, under the {floor:g} GiB a rank needs to "
                "start (host.min_mem_available_gib; seed 000, 'Boot order and pre-flight': 'at least 100 GiB "
                "MemAvailable on every node'; its host kernel 'lets helpers be paused and their memory released "
                "during load')"
            )

    def stop_step() -> None:
        wanted_stop = params.get("stop_ranks")
        result["ranks_stopped"] = None
        try:
            stopped = node.stop(
                wanted_stop["remove"],
                wanted_stop["stop_timeout"],
                wanted_stop["save_dir"] or None,
                wanted_stop["log_lines"],
            )
        except (RankStopError, ValueError) as error:  # the engine could not be asked; docker_host not a socket URL
            result["errors"].append(f"ranks: {error}")
            return
        result["ranks_stopped"] = {key: stopped[key] for key in ("ranks", "stopped", "removed")}
        result["changed"] = result["changed"] or stopped["changed"]

    def start_step() -> None:
        result["rank_started"] = None
        if result["errors"]:  # a rank starts only once its node is paused and its guard armed
            return
        try:
            started = node.start(params["rank_container"], params["spec_sha256"])
        except RankStartError as error:
            result["rank_started"] = {"changed": False, "container": error.record}
            result["errors"].append(f"rank: {error}")
            return
        except ValueError as error:  # docker_host is not a socket URL
            result["errors"].append(f"rank: {error}")
            return
        result["rank_started"] = started
        result["changed"] = result["changed"] or started["changed"]

    steps = (helpers_step, memory_step, guard_step) if wanted == "stopped" else (guard_step, helpers_step)
    if params.get("stop_ranks") is not None:
        steps = (stop_step, *steps)  # the ranks first: the guard goes idle and the helpers resume once none runs
    for step in steps:
        step()
    if params.get("start_rank"):
        start_step()
    if params.get("rank_container"):
        try:
            result["rank"] = node.rank(params["rank_container"])
        except ValueError as error:  # docker_host is not a socket URL
            result["errors"].append(f"rank: {error}")
    if wanted == "started" and path and (found is not None or unreadable) and not result["errors"]:
        if module.check_mode:
            result["changed"] = True
        else:
            journal["closed"] = _journal.close(path)
            result["changed"] = result["changed"] or journal["closed"]
    return result


ARGUMENT_SPEC = {
    "helpers": {"type": "list", "elements": "str", "default": []},
    "helpers_state": {"type": "str", "choices": ["stopped", "started"], "required": True},
    "mem_available_min_gib": {"type": "float"},
    "guard_phase": {"type": "str", "choices": ["idle", "startup", "steady"]},
    "guard_clear": {"type": "bool", "default": False},
    "guard_command": {"type": "path", "default": "/usr/local/sbin/dgxspark-memguard"},
    "rank_container": {"type": "str"},
    "start_rank": {"type": "bool", "default": False},
    "spec_sha256": {"type": "str"},
    **DOCKER_HOST,
    "timeout": {"type": "int", "default": 90},
    "journal": {"type": "path", "default": _journal.DEFAULT_PATH},
    "journal_by": {"type": "str", "default": ""},
    "stop_ranks": {"type": "dict", "options": STOP_OPTIONS},
}


def main() -> None:
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        required_if=[("start_rank", True, ("rank_container", "spec_sha256"))],
        supports_check_mode=True,
    )
    # before anything else: no journal written, no systemctl called (module_utils/_unit_names.py, the schema's list)
    try:
        refuse_not_unit_names(module.params["helpers"])
    except ValueError as error:
        module.fail_json(msg=f"helpers: {error}")
    never = refused_helpers(module.params["helpers"])
    if never:
        module.fail_json(msg="helpers: never paused: " + "; ".join(f"{name!r} ({why})" for name, why in never))
    if module.params["stop_ranks"] is not None and module.params["helpers_state"] != "started":
        module.fail_json(msg="stop_ranks goes with helpers_state=started (stop the ranks, then resume the helpers)")
    result = run(module, Node(module))
    if result["errors"]:
        module.fail_json(msg="; ".join(result["errors"]), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
