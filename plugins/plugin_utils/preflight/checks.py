# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot's preflight: every node's facts (one node_facts call each) against the plan, on one report.

One line per check and per node, PASS, FAIL, WARN or SKIP with the reason; a check skipped on purpose
says so and what it would have been. Nothing here touches a node: it reads what node_facts gathered.

Checks (names for ``skip``): ``node-facts`` (the node answered), ``node-problems`` (what node_facts could not
read or write there, its ``problems``: each named with its section, source and message, a WARN, since the value
it left null may hide something another check then cannot see; a non-root login that cannot write the weights'
hash cache, say), ``docker`` (its engine answers),
``mem-available`` (the profile's ``host.min_mem_available_gib``; seed 000: 100 GiB; only for a rank that must
start: a rank already serving exactly as planned passes whatever its MemAvailable), ``previous-container``
(none of the rank's name, unless it already serves exactly as planned or the operator asked to replace it; one
that differs is shown field by field, ``field: running → planned``, for the image, the engine's command, the
environment and the labels, secret-looking values as ``***``), ``image-present`` (the image is on the node:
boots never pull; found as docker_container finds it, by tag, by repository digest or by ID, so a profile that
names the image by digest FAILs a node holding another build), ``image-id`` (the same image ID on every node),
``guard-tripped`` (the memory guard is not tripped and is up: a trip FAILs with its time, reason and samples
unless the operator asked to clear it, and a trip whose stop-all some peer did not acknowledge FAILs even then,
naming those peers; a guard that is down - its state stale or its pid gone, or its unit
failed - FAILs with the unit's result and restarts and says to read ``journalctl`` and ``systemctl
reset-failed`` it; a guard up whose health is not ok FAILs when its peer listener does not listen or a peer's
trip was refused for clock skew, and WARNs for other problems, write errors included; a guard not installed
yet WARNs; a guard whose last load's startup phase ran over ``host.startup_memguard_wait_seconds`` - recorded
overdue and judged as steady from then on, never stopped for being slow - WARNs with how long the load took),
``port-free`` (the head's API port and the master port are not held by another process; held by
the rank's own container that serves as planned is fine), ``kernel`` and ``limits`` (the kernel role's
findings: release, pages, memory saver, command line; what dockerd can grant), ``fabric-ports`` (the ConnectX
ports have carrier), ``fabric-not-management`` (no planned fabric port carries the address the boot connects
to, ``ansible_host``, nor the node's IPv4 default route: the fabric role would take over the management
interface), ``weights`` (the weights path exists), ``kv-fit`` (on the head only: the planned KV cache holds one
``max_model_len`` sequence at the per-token cost of the weights' own ``config.json``, from node_facts'
``weights.model_configs``; FAIL in vLLM's words; ``_kv_fit``), ``engram-nvme`` (with ``engram.placement: disk``, the
directory Engram reads is on the node's local NVMe SSD, from node_facts' ``disk.mounts``; seed 002 sections 1 and
5.2; ``_engram_disk``), ``secret-files`` (each of the profile's
``container.secrets`` is a regular file on the node, owned by root or by the user node_facts runs as, mode
0600 or stricter: from node_facts' ``secrets`` section, by ``stat`` alone; no line when the profile names no
secret), ``weights-identity`` (every node holds the same weights: node_facts' ``weights`` manifests compared
file by file, by name, size and SHA-256; ``_weights_identity``);
and, made in ``_boot_preflight`` from the head's
``releases`` section, ``release`` (the boot serves the promoted release, or a candidate asked for, or rolls
back to a known release) and ``rollback-images`` (the release a rollback would go to has its image on every
node).

``guard-tripped`` reads node_facts' ``memguard`` section and ``port-free`` its ``ports`` section (asked for
the plan's ports): a node whose facts lack them WARNs that the check could not be made.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.module_utils._journal import said as journal_said
from ansible_collections.dgxspark.cluster.plugins.module_utils._labels import (
    LABEL_PREFIX,
    PROFILE_LABEL,
    SPEC_LABEL,
    WINDOW_LABEL,
)
from ansible_collections.dgxspark.cluster.plugins.module_utils._secret_names import is_secret_name
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan import kernel as _kernel
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.engram_disk import engram_storage
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.engram_disk import judge as engram_nvme
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import MANAGEMENT_VAR, management_ip
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight import (
    management_subnets as _management_subnets,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.kv_fit import kv_fit
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.weights import CHECK as WEIGHTS_IDENTITY
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.weights import identity
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.api_access import KEY_SECRET
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.images import (
    find_image,
    near_misses,
    parse_reference,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import effective_container
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.vllm import serve_argv

GIB = 1024**3
PASS, FAIL, WARN, SKIP = "PASS", "FAIL", "WARN", "SKIP"
CHECKS = (
    "node-facts",
    "node-problems",
    "interrupted-boot",
    "docker",
    "mem-available",
    "previous-container",
    "window-job",
    "image-present",
    "image-id",
    "guard-tripped",
    "port-free",
    "kernel",
    "limits",
    "fabric-ports",
    "fabric-not-management",
    "weights",
    "kv-fit",
    "engram-nvme",
    "weights-identity",
    "secret-files",
    "release",
    "rollback-images",
)
# What node_facts returns instead of the value of a secret's name (module_utils/_docker_engine.py, is_secret_name).
NODE_REDACTED = "<redacted>"
MASKED = "***"
UNSET = "(unset)"
ABSENT = "(absent)"
SWITCH = "(set)"
# Labels that differ whenever the spec does: on their own they say the difference lies elsewhere.
HASH_LABELS = (f"label {SPEC_LABEL}:", f"label {PROFILE_LABEL}:")
SAMPLES_SHOWN = 6
GUARD_UNIT = "dgxspark-memguard.service"
GUARD_DOWN_FIX = (
    "read why with journalctl -u dgxspark-memguard, then systemctl reset-failed dgxspark-memguard "
    "(after a start-limit hit systemd refuses to start it) and systemctl start dgxspark-memguard"
)
CLEAR_TRIP = (
    "clear it once the cause is understood: the memguard role's clear entry point "
    "(include_role dgxspark.cluster.memguard, tasks_from: clear), or boot with -e boot_clear_trip=true"
)


def check_line(check: str, host: str, status: str, message: str) -> dict[str, str]:
    """One line of the report."""
    return {"check": check, "host": host, "status": status, "message": message}


_line = check_line


def preflight(
    facts: Mapping[str, Any],
    plan: Mapping[str, Any],
    profile: Mapping[str, Any],
    replace: bool = False,
    skip: Sequence[str] = (),
    clear_trip: bool = False,
    more: Sequence[Mapping[str, str]] = (),
    management: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Every check on every rank's host; ``failed`` when any check FAILs; ``as_planned``: host to whether
        its rank already serves exactly as planned. ``replace``: the operator asked to replace a previous
        container; ``clear_trip``: to clear a tripped memory guard (the boot does it); ``more``: lines of checks made
    elsewhere on the same facts (the releases'), reported and judged with these; ``management``: host to the
    address the boot connects to (``ansible_host``, else the inventory name, which is the default here)."""
    unknown = sorted(set(skip) - set(CHECKS))
    if unknown:
        raise ValueError(f"unknown preflight checks to skip: {', '.join(unknown)} (known: {', '.join(CHECKS)})")
    host_section = profile.get("host", {})
    waivers = profile.get("waivers") or {}
    floor = float(host_section.get("min_mem_available_gib", 100))
    expect = {**(host_section.get("kernel") or {})}
    lines: list[dict[str, str]] = []
    image_ids: dict[str, str] = {}
    needed = _planned_ports(plan)
    shape = (profile.get("shapes") or {}).get(plan.get("shape"))
    model_path = effective_container(profile, plan["shape"]).get("model_path") if shape is not None else None
    as_planned: dict[str, bool] = {}
    created: list[str] = []  # a container created as planned and never started: the boot creates it again
    name = plan["container_name"]  # every rank's
    fabric_ports, fabric_addresses = _management_subnets.planned_fabric(plan)
    subnets = _management_subnets.cluster_subnets(
        facts, {host: (management or {}).get(host) or host for host in fabric_ports}, fabric_ports
    )
    for rank in plan["ranks"]:
        host = rank["host"]
        node = facts.get(host)
        if not isinstance(node, Mapping) or "memory" not in node:
            lines.append(_line("node-facts", host, FAIL, f"rank {rank['rank']}: no node facts (did it answer?)"))
            as_planned[host] = False
            continue
        lines.append(
            _line("node-facts", host, PASS, f"rank {rank['rank']}: facts gathered in {node.get('elapsed_ms')} ms")
        )
        lines.append(_node_problems(host, node))
        interrupted = interrupted_boot(host, node)
        if interrupted is not None:
            lines.append(interrupted)
        docker = node.get("docker") or {}
        # a rank an interrupted boot started is stopped with the rest of its undo: not one that serves as planned
        serving = None if _journal_open(node) else _serving_as_planned(rank, name, docker)
        as_planned[host] = serving is not None
        replacing = replace and _runs(name, docker)
        lines.append(_memory(host, node, floor, name if serving else None, replacing))
        if not docker.get("present"):
            lines.append(_line("docker", host, FAIL, f"the Docker engine does not answer: {docker.get('error')}"))
        else:
            lines.append(_line("docker", host, PASS, f"Docker {(docker.get('engine') or {}).get('version')}"))
            lines.append(_previous(host, rank, name, docker, replace, _journal_open(node)))
            window = window_job_running(host, docker)
            if window is not None:
                lines.append(window)
            if _created_as_planned(rank, name, docker):
                created.append(host)
            image_line, image_id = _image(host, rank, docker)
            lines.append(image_line)
            if image_id:
                image_ids[host] = image_id
        lines.append(_overdue(_guard(host, node, clear_trip), node, host_section.get("startup_memguard_wait_seconds")))
        lines.append(
            _ports(host, rank, name, node, needed if rank["rank"] == 0 else {}, serving, replace, _journal_open(node))
        )
        lines += _kernel_lines(host, node, {**expect, "ulimits": rank.get("ulimits") or None})
        lines.append(_fabric(host, node))
        lines.append(
            fabric_not_management(
                host,
                node,
                (management or {}).get(host) or host,
                waivers.get(FABRIC_APART),
                subnets=subnets,
                fabric_addresses=fabric_addresses.get(host, []),
            )
        )
        lines.append(_weights(host, node, host_section.get("weights_path")))
        if rank["rank"] == 0 and shape is not None:
            # judged when the nodes' facts were bound into the plan (bind), else here
            lines.append((plan.get("kv") or {}).get("fit") or kv_fit(host, node, plan))
        if shape is not None:
            storage = engram_storage(
                (shape.get("engram") or {}).get("placement"),
                rank.get("environment") or {},
                rank.get("docker_run_args") or [],
                model_path,
                host_section.get("weights_path"),
            )
            lines.append(engram_nvme(host, node, storage))
        # container.secrets and the API's key and TLS files (the plan's ``secrets``), each a file on every node
        secrets = plan.get("secrets") or (profile.get("container") or {}).get("secrets") or {}
        if secrets:
            lines.append(secret_files(host, node, secrets))
    # tensor parallel: a rank cannot join a group that runs already, so when any rank must start, the ranks that
    # serve as planned are restarted with it (the whole group starts together)
    restart = sorted(h for h, ok in as_planned.items() if ok) if not all(as_planned.values()) else []
    # the containers the boot creates again without being asked: those restarted with the group, and those created
    # as planned and never started
    recreate = sorted({*restart, *created})
    if restart:
        starting = ", ".join(f"rank {r['rank']} ({r['host']})" for r in plan["ranks"] if not as_planned.get(r["host"]))
        lines = [
            _restarted(line, starting) if line["check"] == "previous-container" and line["host"] in restart else line
            for line in lines
        ]
    lines += _image_ids(image_ids, [r["host"] for r in plan["ranks"]])
    verdicts = identity(facts, [r["host"] for r in plan["ranks"]], host_section.get("weights_path"))
    lines += [_line(WEIGHTS_IDENTITY, host, status, message) for host, (status, message) in verdicts.items()]
    lines += [dict(line) for line in more]
    lines = [_skipped(line) if line["check"] in skip else line for line in lines]
    failed = [line for line in lines if line["status"] == FAIL]
    return {
        "lines": lines,
        "failed": bool(failed),
        "failures": failed,
        "report": report(lines),
        "as_planned": as_planned,
        "restart": restart,
        "recreate": recreate,
        # nodes where a boot that did not finish left its journal: undone first (playbooks/boot.yml)
        "interrupted": sorted(h for h in as_planned if _journal_open(facts.get(h) or {})),
    }


def _journal_open(node: Mapping[str, Any]) -> bool:
    return bool((node.get("journal") or {}).get("open"))


def interrupted_boot(host: str, node: Mapping[str, Any]) -> dict[str, str] | None:
    """A boot's journal left on the node (node_facts' ``journal`` section): a boot whose controller died after it
    paused this node. WARN, saying what it had changed: the boot undoes it before anything else (every rank stopped
    and removed, the helpers it paused resumed, the guard idle), then runs its preflight again. None when the
    section was not gathered."""
    journal = node.get("journal")
    if not isinstance(journal, Mapping):
        return None
    if not journal.get("open"):
        return _line("interrupted-boot", host, PASS, "no interrupted boot left anything here")
    return _line(
        "interrupted-boot",
        host,
        WARN,
        f"{journal_said(dict(journal))}: undone before anything else (its ranks stopped and removed, its helpers "
        "resumed, the guard idle), "
        "then the preflight runs again",
    )


def _restarted(line: dict[str, str], starting: str) -> dict[str, str]:
    name = line["message"].split(" ", 1)[0]
    return _line(
        "previous-container",
        line["host"],
        WARN,
        f"{name} runs as planned, but {starting} must start: it is restarted with them (a tensor-parallel group "
        "starts together; a rank cannot join one that runs)",
    )


def _skipped(line: dict[str, str]) -> dict[str, str]:
    return {**line, "status": SKIP, "message": f"skipped on purpose (would be {line['status']}: {line['message']})"}


def _node_problems(host: str, node: Mapping[str, Any]) -> dict[str, str]:
    """``node-problems``: what node_facts reports it could not read or write (``problems``: section, source,
    message), each named; a WARN, since a value it left null may hide what another check needs."""
    problems = node.get("problems")
    if not problems or not isinstance(problems, list):
        return _line("node-problems", host, PASS, "node_facts reported no problem")
    named = []
    for item in problems:
        if isinstance(item, Mapping):
            named.append(f"{item.get('section') or '?'}: {item.get('source') or '?'}: {item.get('message')}")
        else:
            named.append(str(item))
    return _line(
        "node-problems",
        host,
        WARN,
        f"node_facts reported {len(named)} problem(s) (section: source: message): {'; '.join(named)}; "
        "a value it could not read is unknown to the other checks",
    )


def _serving_as_planned(rank: Mapping[str, Any], name: str, docker: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The rank's container (``name``) when it runs with its spec (label ``spec_sha256``): a re-boot leaves it."""
    for item in docker.get("containers") or []:
        if item.get("name") == name and item.get("state") == "running":
            if (item.get("labels") or {}).get(SPEC_LABEL) == rank["spec_sha256"]:
                return item
    return None


def _runs(name: str, docker: Mapping[str, Any]) -> bool:
    """A container of the rank's name runs on the node (whatever its spec)."""
    return any(c.get("name") == name and c.get("state") == "running" for c in docker.get("containers") or [])


def _memory(
    host: str, node: Mapping[str, Any], floor: float, serving: str | None, replacing: bool = False
) -> dict[str, str]:
    available = (node.get("memory") or {}).get("mem_available_bytes")
    if serving:
        found = "unknown" if available is None else f"{available / GIB:.1f} GiB"
        return _line(
            "mem-available",
            host,
            PASS,
            f"{serving} already serves as planned (MemAvailable {found} with it loaded); "
            f"the {floor:g} GiB floor applies to a rank that must start",
        )
    if available is None:
        return _line("mem-available", host, FAIL, "MemAvailable unknown (could not read /proc/meminfo)")
    found = f"MemAvailable {available / GIB:.1f} GiB, needs >= {floor:g} GiB"
    if available < floor * GIB and replacing:  # a rollback or a candidate: the running rank holds the memory
        return _line(
            "mem-available",
            host,
            WARN,
            f"{found}, but the rank that runs now holds memory and this boot replaces it (asked for): "
            "the guard's startup phase watches the new rank's load",
        )
    status = PASS if available >= floor * GIB else FAIL
    return _line("mem-available", host, status, found)


def _created_as_planned(rank: Mapping[str, Any], name: str, docker: Mapping[str, Any]) -> bool:
    """The rank's container was created as planned and never started (a boot that stopped between its create and
    start phases): it holds nothing, and the boot creates it again without being asked."""
    found = next((c for c in docker.get("containers", []) if c.get("name") == name), None)
    return (
        bool(found)
        and found.get("state") == "created"
        and ((found.get("labels") or {}).get(SPEC_LABEL) == rank["spec_sha256"])
    )


def _previous(
    host: str, rank: Mapping[str, Any], name: str, docker: Mapping[str, Any], replace: bool, interrupted: bool = False
) -> dict[str, str]:
    found = next((c for c in docker.get("containers", []) if c.get("name") == name), None)
    if found is None:
        return _line("previous-container", host, PASS, f"no container named {name}")
    if interrupted:  # the interrupted boot's undo stops and removes it before the preflight runs again
        return _line(
            "previous-container",
            host,
            PASS,
            f"{name} is {found.get('state')}: the interrupted boot's undo stops and removes it first",
        )
    same = (found.get("labels") or {}).get(SPEC_LABEL) == rank["spec_sha256"]
    state = found.get("state")
    if state == "running" and same:
        return _line("previous-container", host, PASS, f"{name} already runs exactly as planned: left alone")
    if _created_as_planned(rank, name, docker):
        return _line("previous-container", host, PASS, f"{name} was created as planned, never started: created again")
    what = f"{name} is {state} with {'the planned' if same else 'another'} spec"
    if not same:
        what += f" ({'; '.join(drift(rank, found, docker))})"
    if replace:
        return _line("previous-container", host, WARN, f"{what}: it will be replaced (asked for)")
    return _line(
        "previous-container",
        host,
        FAIL,
        f"{what}; remove it, or boot with -e boot_replace=true to replace it",
    )


def _planned_ports(plan: Mapping[str, Any]) -> dict[int, str]:
    """The fixed ports the plan needs on the head: its API port, and the master port when ranks meet there."""
    ranks = plan["ranks"]
    head = next((r for r in ranks if r.get("rank") == 0), ranks[0] if ranks else {})
    ports: dict[int, str] = {}
    if head.get("api_port"):
        ports[int(head["api_port"])] = "the API port"
    if plan.get("master_port") and len(ranks) > 1:
        ports.setdefault(int(plan["master_port"]), "the master port")
    return ports


def _ports(
    host: str,
    rank: Mapping[str, Any],
    name: str,
    node: Mapping[str, Any],
    needed: Mapping[int, str],
    serving: Mapping[str, Any] | None,
    replace: bool,
    interrupted: bool = False,
) -> dict[str, str]:
    if not needed:
        return _line("port-free", host, PASS, f"rank {rank['rank']} needs no fixed port (it runs --headless)")
    named = " and ".join(f"{what} {port}" for port, what in needed.items())
    section = node.get("ports")
    if not isinstance(section, Mapping):
        return _line(
            "port-free",
            host,
            WARN,
            f"could not check {named}: node_facts gathered no ports section "
            f"(sections: [ports], ports: [{', '.join(str(p) for p in needed)}])",
        )
    own_id = next(
        (c.get("id") for c in (node.get("docker") or {}).get("containers") or [] if c.get("name") == name), None
    )
    taken: list[str] = []
    own: list[str] = []
    for port, what in needed.items():
        holders: dict[tuple[Any, Any], list[str]] = {}
        for entry in section.get("listening") or []:
            if entry.get("port") == port:
                holders.setdefault((entry.get("pid"), entry.get("container")), []).append(str(entry.get("address")))
        for (pid, container), addresses in holders.items():
            if own_id and container == own_id:
                own.append(f"{what} {port}")
            else:
                entry = next(e for e in section["listening"] if (e.get("pid"), e.get("container")) == (pid, container))
                taken.append(f"{what} {port} is held by {_holder(entry)} on {', '.join(addresses)}")
    if taken:
        unreadable = section.get("unreadable_processes") or 0
        hint = (
            f" ({unreadable} process(es) could not be read: gather node_facts with become to name it)"
            if unreadable and any("could not name" in t for t in taken)
            else ""
        )
        return _line(
            "port-free",
            host,
            FAIL,
            f"{'; '.join(taken)}{hint}; stop it, or plan other ports (the profile's container.api_port, master_port)",
        )
    if own:
        which = " and ".join(dict.fromkeys(own))
        if serving is not None:
            return _line("port-free", host, PASS, f"{which}: held by {name} itself, which serves as planned")
        if interrupted:
            return _line(
                "port-free", host, PASS, f"{which}: held by {name}, which the interrupted boot's undo stops first"
            )
        if replace:
            return _line(
                "port-free", host, WARN, f"{which}: held by the previous {name}, which will be replaced (asked for)"
            )
        return _line(
            "port-free",
            host,
            FAIL,
            f"{which}: held by the previous {name} (another spec); "
            "remove it, or boot with -e boot_replace=true to replace it",
        )
    return _line("port-free", host, PASS, f"{named}: free")


def _holder(entry: Mapping[str, Any]) -> str:
    if entry.get("pid") is None:
        return f"a process node_facts could not name (socket owner uid {entry.get('uid')})"
    where = ""
    if entry.get("container"):
        where = f", container {entry.get('container_name') or _short(str(entry['container']))}"
    return f"pid {entry['pid']} ({entry.get('comm') or 'unknown command'}{where})"


def _guard(host: str, node: Mapping[str, Any], clear_trip: bool) -> dict[str, str]:
    guard = node.get("memguard")
    if not isinstance(guard, Mapping):
        return _line("guard-tripped", host, WARN, "could not check: node_facts gathered no memguard section")
    tripped = guard.get("tripped")
    if isinstance(tripped, Mapping):
        what = (
            f"the memory guard tripped at {_utc(tripped)}: {tripped.get('reason')}; {_samples(tripped.get('samples'))}"
        )
        unacknowledged = _stop_all_missing(tripped.get("stop_all"))
        if unacknowledged:
            return _line("guard-tripped", host, FAIL, f"{what}; {unacknowledged}")
        if clear_trip:
            return _line("guard-tripped", host, WARN, f"{what}; it will be cleared (asked for)")
        return _line("guard-tripped", host, FAIL, f"{what}; {CLEAR_TRIP}")
    unit = ((node.get("services") or {}).get("units") or {}).get(GUARD_UNIT)
    unit = unit if isinstance(unit, Mapping) else {}
    unit_known = unit.get("load_state") == "loaded"
    if not guard.get("installed") and not unit_known:
        return _line(
            "guard-tripped", host, WARN, "the memory guard is not installed yet (a fresh node): the boot installs it"
        )
    if guard.get("running") is False or unit.get("active_state") == "failed":
        return _line(
            "guard-tripped",
            host,
            FAIL,
            f"not tripped, but the memory guard is down ({_down(guard, unit)}); {GUARD_DOWN_FIX}",
        )
    if guard.get("running") is None:
        return _line(
            "guard-tripped",
            host,
            WARN,
            f"the memory guard is installed but has written no state "
            f"({GUARD_UNIT} {unit.get('active_state') or 'unknown'}): the boot starts it",
        )
    return _guard_health(host, guard)


def _stop_all_missing(stop_all: Any) -> str | None:
    """What a trip's stop-all left undone: the peers that did not acknowledge it (their ranks may still run,
    hung in NCCL), or None when every peer did (or the trip told no peer: a peer's trip, policy local). Asking
    to clear the trip does not pass this: the operator checks those nodes first."""
    if not isinstance(stop_all, Mapping) or (stop_all.get("done") is True and stop_all.get("ok") is True):
        return None
    missing = stop_all.get("not_acknowledged")
    named = (
        ", ".join(f"{m.get('host')} ({m.get('error')})" for m in missing if isinstance(m, Mapping))
        if isinstance(missing, list)
        else ""
    )
    when = "" if stop_all.get("done") is True else " (the guard stopped before its deadline)"
    return (
        f"its stop-all was not acknowledged by every peer{when}: {named or 'peers unknown'}; their ranks may "
        "still run: stop them (playbooks/stop.yml), then clear this guard (the memguard role's clear entry point); "
        "boot_clear_trip does not clear a trip whose stop-all was not acknowledged"
    )


def _overdue(line: dict[str, str], node: Mapping[str, Any], wait: Any) -> dict[str, str]:
    """The guard's last load ran over ``host.startup_memguard_wait_seconds``: the guard recorded it overdue and
    judged it by the steady floor and grace from then on (a slow load is not stopped for being slow; seed 000's
    grace). Not a failure, but the operator should know: a PASS becomes a WARN naming how long the load took."""
    guard = node.get("memguard")
    if not isinstance(guard, Mapping) or guard.get("startup_overdue") is not True:
        return line
    took = guard.get("startup_seconds")
    took_text = (
        f"ran {took:.1f} s"
        if isinstance(took, (int, float)) and not isinstance(took, bool)
        else "ran over (how long is not recorded: a guard that predates startup_seconds)"
    )
    limit = f" ({wait:g} s)" if isinstance(wait, (int, float)) and not isinstance(wait, bool) else ""
    note = (
        f"the last load's startup phase {took_text}, over host.startup_memguard_wait_seconds{limit}: the guard "
        "recorded it overdue and judged it by the steady floor and grace from then on (a slow load is not stopped "
        "for being slow); find out why it was slow (the weights' disk, helpers not paused, another process's memory)"
    )
    status = WARN if line["status"] == PASS else line["status"]
    return {**line, "status": status, "message": f"{line['message']}; {note}"}


def _down(guard: Mapping[str, Any], unit: Mapping[str, Any]) -> str:
    """Why a guard counts as down: the unit's state, result and restarts, and the age of its state."""
    parts = []
    if unit:
        parts.append(
            f"{GUARD_UNIT} {unit.get('active_state')}, result {unit.get('result') or 'unknown'}, "
            f"{unit.get('restarts') or 0} restart(s)"
        )
    else:
        parts.append(f"{GUARD_UNIT}: state unknown (node_facts was not asked for it)")
    if guard.get("running") is False:
        stale = (guard.get("health") or {}).get("stale_after_s") or 30
        parts.append(f"its state is {guard.get('state_age_s')} s old, stale after {stale:g} s, or its pid is gone")
    return "; ".join(parts)


def _guard_health(host: str, guard: Mapping[str, Any]) -> dict[str, str]:
    """A guard that runs: what its own health says. Under the stop-all policy (it has a peer listener), a
    listener that does not listen or a peer's trip refused for clock skew means a trip elsewhere would not
    stop this rank: FAIL. Other problems (writes that fail, peers that do not resolve) WARN."""
    passed = f"not tripped (phase {guard.get('phase')}, {guard.get('trips')} trip(s) recorded)"
    health = guard.get("health")
    if not isinstance(health, Mapping) or health.get("ok") is not False:
        return _line("guard-tripped", host, PASS, passed)
    problems = "; ".join(str(p) for p in health.get("problems") or []) or "no problem named"
    peers = guard.get("peers") or {}
    deaf = peers.get("listening") is False
    skew = peers.get("clock_skew")
    if deaf or skew:
        fixes = []
        if deaf:
            fixes.append(
                f"its peer listener does not listen ({peers.get('listen_error')}): a trip on another rank would "
                "not stop this one; free the port or bring the address up (the guard retries every 10 s)"
            )
        if skew:
            fixes.append(
                "a peer's trip was refused for clock skew: fix the clocks (chrony), then clear the guard "
                "(the memguard role's clear entry point, or -e boot_clear_trip=true)"
            )
        return _line(
            "guard-tripped", host, FAIL, f"{passed}, but the memory guard is unhealthy: {problems}; {'; '.join(fixes)}"
        )
    writes = health.get("write_errors")
    counted = f" ({writes} write error(s))" if isinstance(writes, int) and writes else ""
    return _line(
        "guard-tripped",
        host,
        WARN,
        f"{passed}, but the memory guard reports problems{counted}: {problems}; it keeps guarding, "
        "fix them (free space under /var/log/dgxspark-memguard, name resolution of its peers)",
    )


def _utc(tripped: Mapping[str, Any]) -> str:
    when = tripped.get("time")
    if isinstance(when, (int, float)) and not isinstance(when, bool):
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))
    return str(tripped.get("time_utc") or "an unknown time")


def _samples(samples: Any) -> str:
    if not isinstance(samples, list):
        return "its samples were not found (the guard's decision log has no line for this trip)"
    if not samples:
        return "no samples recorded"
    shown = [s for s in samples[-SAMPLES_SHOWN:] if isinstance(s, Mapping)]
    parts = []
    for sample in shown:
        when, available, psi = sample.get("t"), sample.get("mem_available"), sample.get("psi_full_avg10")
        part = time.strftime("%H:%M:%S", time.gmtime(when)) if isinstance(when, (int, float)) else "?"
        part += f" {available / GIB:.2f} GiB" if isinstance(available, (int, float)) else " MemAvailable unreadable"
        if isinstance(psi, (int, float)):
            part += f" PSI {psi:g} %"
        if sample.get("low"):
            part += " low"
        parts.append(part)
    return f"last {len(shown)} of {len(samples)} samples (UTC): {', '.join(parts)}"


# ---------------------------------------------------------------- drift: how a previous container differs
def drift(rank: Mapping[str, Any], found: Mapping[str, Any], docker: Mapping[str, Any]) -> list[str]:
    """``field: running → planned`` for the image, the engine's command, the environment and the labels of
    a previous container with another spec. The command and environment come from node_facts' detail of
    the serving container (``docker.container``); without it only the image and labels are compared.
    Environment variables the plan does not set are compared only when they share a prefix with one it
    sets (``NCCL_``, ``VLLM_``, ...): the others come from the image."""
    detail = docker.get("container")
    if not (isinstance(detail, Mapping) and detail.get("exists") and detail.get("name") == found.get("name")):
        detail = None
    changes = _image_drift(rank, found, docker)
    if detail is not None:
        running = _argv_items([*(detail.get("entrypoint") or []), *(detail.get("cmd") or [])])
        changes += _items_drift("command", running, _argv_items([rank["entrypoint"], *rank["command"]]), ABSENT)
        changes += _env_drift(detail.get("env") or {}, rank["environment"])
    labels = dict((detail or found).get("labels") or {})
    known = [k for k in labels if k.startswith(f"{LABEL_PREFIX}.")]
    label_changes = _items_drift("label", {k: labels[k] for k in known}, rank["labels"], UNSET)
    if not changes and all(c.startswith(HASH_LABELS) for c in label_changes):
        label_changes.append("the rest differs in the docker run options (not compared here)")
    if detail is None:
        label_changes.append("command and environment not compared (node_facts gave no detail of this container)")
    return changes + label_changes


def _short(value: str) -> str:
    """A sha256 digest (64 hex digits, with or without ``sha256:``) by its first 12 digits."""
    digits = value[len("sha256:") :] if value.startswith("sha256:") else value
    return value[: len(value) - 52] if re.fullmatch(r"[0-9a-f]{64}", digits) else value


def _image_drift(rank: Mapping[str, Any], found: Mapping[str, Any], docker: Mapping[str, Any]) -> list[str]:
    running, planned = found.get("image"), rank["image"]
    if running is not None and running != planned:
        return [f"image: {running} → {planned}"]
    planned_id = (find_image(docker.get("images") or [], planned) or {}).get("id")
    running_id = found.get("image_id")
    if running_id and planned_id and running_id != planned_id:
        return [
            f"image: {planned} {_short(running_id)} → {planned} {_short(planned_id)} (the tag names another image now)"
        ]
    return []


def _argv_items(argv: Sequence[Any]) -> dict[str, str]:
    """An engine's argv by flag (``--max-num-seqs`` → ``4``; a switch → ``(set)``) and by position (``word 2``).

    The words before the first ``--`` option (the entrypoint, a wrapper, ``serve``, the model) are positions; the
    rest is read by the one model of serve arguments (``_vllm.serve_argv``): a flag by the option string vLLM takes
    it for (``--max_num_seqs=4`` is ``--max-num-seqs``), with the value vLLM keeps (the last one given)."""
    words = [str(word) for word in argv]
    first = next((i for i, word in enumerate(words) if word.startswith("--") and len(word) > 2), len(words))
    items = {f"word {n}": word for n, word in enumerate(words[:first], 1)}
    position = first
    for arg in serve_argv(words[first:]).args:
        if not arg.flag:
            position += 1
            items[f"word {position}"] = str(arg.value)
            continue
        flag = f"{arg.flag}.{arg.key}" if arg.key else arg.flag
        value = SWITCH if arg.value is None else arg.value
        appends = (arg.spec or {}).get("action") == "append"
        items[flag] = f"{items[flag]}, {value}" if appends and flag in items else value
    return items


def _items_drift(field: str, running: Mapping[str, Any], planned: Mapping[str, Any], missing: str) -> list[str]:
    keys = [*planned, *(k for k in running if k not in planned)]
    return [
        f"{field} {key}: {_short(str(running[key])) if key in running else missing} → "
        f"{_short(str(planned[key])) if key in planned else missing}"
        for key in keys
        if running.get(key) != planned.get(key)
    ]


def _env_drift(running: Mapping[str, Any], planned: Mapping[str, Any]) -> list[str]:
    prefixes = tuple(sorted({key.split("_", 1)[0] + "_" for key in planned if "_" in key}))
    keys = [*planned, *(k for k in running if k not in planned and k.startswith(prefixes))]
    changes = []
    for key in keys:
        old = None if running.get(key) is None else str(running[key])
        new = None if planned.get(key) is None else str(planned[key])
        if old == new or (old == NODE_REDACTED and new is not None):
            continue  # the same, or a secret node_facts did not return: cannot be compared
        # a secret's name (the rule node_facts redacts by, so its values reach here as NODE_REDACTED) is shown as ***
        secret = is_secret_name(key) or old == NODE_REDACTED
        changes.append(f"env {key}: {_masked(old, secret)} → {_masked(new, secret)}")
    return changes


def _masked(value: str | None, secret: bool) -> str:
    if value is None:
        return UNSET
    return MASKED if secret else value


def window_job_running(host: str, docker: Mapping[str, Any]) -> dict[str, str] | None:
    """``window-job``: a job of the multimodal window (playbooks/window.yml, the ``dgxspark.cluster.window``
    label) that runs on the node FAILs: inference and the window never overlap. None when none runs."""
    running = sorted(
        str(c.get("name"))
        for c in docker.get("containers") or []
        if WINDOW_LABEL in (c.get("labels") or {}) and c.get("state") == "running"
    )
    if not running:
        return None
    return _line(
        "window-job",
        host,
        FAIL,
        f"window job {', '.join(running)} runs here (playbooks/window.yml): inference and the window never overlap; "
        "wait for it (window.yml boots the promoted release again after its job) or docker stop it",
    )


def _image(host: str, rank: Mapping[str, Any], docker: Mapping[str, Any]) -> tuple[dict[str, str], str | None]:
    """``image-present``: the node has the image the rank names, found as docker_container finds it (by tag, by
    repository digest or by ID: ``_images``); a profile that names it by digest FAILs a node that holds another
    build of it, or the same image without the repository digest the module looks for."""
    image = rank["image"]
    ref = parse_reference(image)
    images = docker.get("images") or []
    found = find_image(images, image)
    if found is not None:
        if ref.by_id:
            names = ", ".join(found.get("tags") or []) or "untagged"
            return _line("image-present", host, PASS, f"image {image} is here ({names})"), found.get("id")
        return _line("image-present", host, PASS, f"{image} is {found.get('id')}"), found.get("id")
    never = "(a boot never pulls): playbooks/images.yml -e images_profile=true streams it from the head"
    missed = near_misses(images, image)
    if ref.digest and not ref.by_id and missed:
        if any(m.startswith(f"{ref.digest} ") for m in missed):
            why = (
                f"image {ref.digest} is here, but without the repository digest {ref.wanted}, which is what "
                "docker_container looks for (repository digests come from a registry, by a pull or a push); name "
                f"the image by its ID alone ({ref.digest}) in the profile"
            )
        else:
            why = (
                f"no image of that name here carries digest {ref.digest}, only {'; '.join(missed)}: another build, "
                "or the same one copied without a registry, which keeps no repository digest; put the named image "
                "there (a boot never pulls), or name the image by its ID (docker image ls --no-trunc shows it) in "
                "the profile"
            )
        return _line("image-present", host, FAIL, f"{image} is not on this node as named: {why}"), None
    what = f"image {image}" if ref.by_id else image
    return _line("image-present", host, FAIL, f"{what} is not on this node {never}"), None


def _image_ids(image_ids: Mapping[str, str], hosts: Sequence[str]) -> list[dict[str, str]]:
    if len(set(image_ids.values())) <= 1:
        if image_ids:
            ids = next(iter(image_ids.values()))
            return [_line("image-id", "all", PASS, f"the same image ID on {len(image_ids)} node(s): {ids}")]
        return []
    groups: dict[str, list[str]] = {}
    for host in hosts:
        if host in image_ids:
            groups.setdefault(image_ids[host], []).append(host)
    detail = "; ".join(f"{image}: {', '.join(names)}" for image, names in groups.items())
    return [_line("image-id", "all", FAIL, f"the nodes hold different images under the same name: {detail}")]


def _kernel_lines(host: str, node: Mapping[str, Any], expect: Mapping[str, Any]) -> list[dict[str, str]]:
    try:
        findings = _kernel.kernel_findings(node, expect)
    except Exception as error:  # noqa: BLE001 - a malformed expectation is reported, not raised mid-report
        return [_line("kernel", host, FAIL, f"could not check: {error}")]
    limits = [f for f in findings if f["check"].startswith(("ulimit", "nr-open"))]
    kernel = [f for f in findings if f not in limits]
    return [_family(family, host, chosen) for family, chosen in (("kernel", kernel), ("limits", limits))]


def _family(family: str, host: str, findings: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """One line for a family of kernel findings: its failures, else its doubts, else what passed."""
    for status in (FAIL, WARN):
        bad = [f["message"] for f in findings if f["status"] == status]
        if bad:
            return _line(family, host, status, "; ".join(bad))
    return _line(
        family, host, PASS, ", ".join(f["check"] for f in findings if f["status"] == PASS) or "nothing required"
    )


def _fabric(host: str, node: Mapping[str, Any]) -> dict[str, str]:
    ports = ((node.get("fabric") or {}).get("interfaces")) or {}
    if not ports:
        return _line("fabric-ports", host, WARN, "no ConnectX fabric port found (the fabric role checks the plan)")
    down = sorted(name for name, port in ports.items() if port.get("present") and port.get("carrier") is not True)
    if down:
        return _line("fabric-ports", host, FAIL, f"no carrier on {', '.join(down)}")
    return _line("fabric-ports", host, PASS, f"carrier on {', '.join(sorted(ports))}")


FABRIC_APART = "fabric-not-management"
FABRIC_APART_FIX = (
    "plan the fabric on ports that do not carry management (dgxspark_fabric_cabling names them), or manage the "
    f"node on another interface ({MANAGEMENT_VAR})"
)


def fabric_not_management(
    host: str,
    node: Mapping[str, Any],
    management: str,
    waived: str | None = None,
    subnets: Sequence[tuple[str, str]] = (),
    fabric_addresses: Sequence[str] = (),
) -> dict[str, str]:
    """``fabric-not-management``: no planned fabric port carries the address the boot connects to, none
    holds the node's IPv4 default route, and none of this host's planned ``fabric_addresses`` is inside a
    management subnet of the cluster (``subnets``: each with where it was found; ``management_subnets``).
    The fabric role takes its ports over (their addresses, MTU 9000,
    their netplan or networkd file), so a management interface among them would lose the connection the
    boot runs on, and NCCL would share it with SSH. A profile that waives the plan's check of the same name
    (``waivers``, with the reason ``waived``) gets a WARN that repeats the reason instead of a FAIL. The fabric
    role runs the same check before it configures a port (the ``fabric_not_management`` filter), when no
    preflight ran before it (``playbooks/prepare.yml``)."""
    fabric = node.get("fabric")
    ports = fabric.get("interfaces") if isinstance(fabric, Mapping) else None
    if not isinstance(ports, Mapping) or not ports:
        return _line(FABRIC_APART, host, WARN, "could not check: node_facts gathered no fabric ports")
    names = sorted(ports)
    address = management_ip(management)
    unknown = [name for name in names if not isinstance(ports[name].get("ipv4"), list)]
    carrying = [
        name
        for name in names
        if name not in unknown and any(str(a).split("/", 1)[0] == address for a in ports[name]["ipv4"])
    ]
    routes = fabric.get("default_routes")
    routes = [r for r in routes if isinstance(r, Mapping)] if isinstance(routes, list) else None
    routed = sorted({str(r.get("interface")) for r in routes or [] if r.get("interface") in ports})
    found = []
    if carrying:
        found.append(
            f"{', '.join(carrying)} carr{'ies' if len(carrying) == 1 else 'y'} the management address {address}"
        )
    if routed:
        found.append(f"the IPv4 default route leaves by {', '.join(routed)}")
    within = {a: held for a in fabric_addresses if (held := _management_subnets.inside(a, subnets)) is not None}
    found += [
        f"the fabric address {a} is inside the management subnet {net} ({where}; seed 000 keeps the fabric on a "
        "private /24 of its own)"
        for a, (net, where) in within.items()
    ]
    if found:
        message = (
            f"a planned fabric port is the management interface: {'; '.join(found)}; the fabric role would take it "
            f"over (its addresses, MTU 9000) and could cut the connection the boot runs on; {FABRIC_APART_FIX}"
        )
        if waived:
            return _line(FABRIC_APART, host, WARN, f"waived {FABRIC_APART} ({waived}): {message}")
        return _line(FABRIC_APART, host, FAIL, message)
    checked, unchecked = [], []
    if address is None:
        unchecked.append(f"the management address {management} is a name (not resolved here)")
    elif ":" in address:
        unchecked.append(f"the management address {address} is IPv6 (node_facts reads the ports' IPv4 addresses)")
    elif unknown:
        unchecked.append(
            f"the IPv4 addresses of {', '.join(unknown)} are unknown ({fabric.get('error') or 'not gathered'})"
        )
    else:
        checked.append(f"the management address {address} is on none of the planned ports ({', '.join(names)})")
    if subnets and fabric_addresses:
        checked.append(
            f"the fabric addresses ({', '.join(fabric_addresses)}) are outside the management subnets "
            f"({', '.join(subnet[0] for subnet in subnets)})"
        )
    if routes is None:
        unchecked.append("the default routes are unknown (node_facts read no /proc/net/route)")
    elif routes:
        checked.append(f"the IPv4 default route leaves by {routes[0].get('interface')}")
    else:
        checked.append("there is no IPv4 default route")
    if not checked:
        return _line(FABRIC_APART, host, WARN, f"could not check: {'; '.join(unchecked)}")
    more = f"; not compared: {'; '.join(unchecked)}" if unchecked else ""
    return _line(FABRIC_APART, host, PASS, "; ".join(checked) + more)


def _weights(host: str, node: Mapping[str, Any], path: str | None) -> dict[str, str]:
    if not path:
        return _line("weights", host, SKIP, "the profile names no host.weights_path")
    disk = node.get("disk") or {}
    if not disk.get("exists"):
        return _line("weights", host, FAIL, f"{path} does not exist on this node")
    free = disk.get("available_bytes")
    return _line("weights", host, PASS, f"{path} exists ({(free or 0) / GIB:.0f} GiB free there)")


SECRET_FILES = "secret-files"
SECRET_MODE_MAX = 0o600
SECRET_FIX = (
    "make each a regular file owned by root with mode 0600 (install -o root -g root -m 0600 SOURCE PATH) on every "
    "node, the API's key (container.api.api_key_file) owned by the login the boot uses when that is not root; the "
    "boot binds each read-only into the rank, and reads only the API's key, on the head, to send it"
)


def secret_files(host: str, node: Mapping[str, Any], secrets: Mapping[str, str]) -> dict[str, str]:
    """``secret-files``: every secret the profile names (``container.secrets``) is on the node as a regular file
    owned by root, or by the user node_facts ran as (the SSH user, without become), with no permission beyond
    0600. From node_facts' ``secrets`` section (``stat`` alone: no content, no size). A FAIL names each path and
    what is wrong with it; a missing section WARNs that the check could not be made."""
    section = node.get("secrets")
    if not isinstance(section, Mapping) or not isinstance(section.get("paths"), Mapping):
        return _line(
            SECRET_FILES,
            host,
            WARN,
            "could not check: node_facts gathered no secrets section (sections: [secrets], secret_files: the "
            "profile's container.secrets)",
        )
    uid = section.get("uid")
    owners = {0} | ({uid} if isinstance(uid, int) else set())
    wrong: list[str] = []
    for name, path in sorted(secrets.items()):
        facts = section["paths"].get(path)
        what = f"{name} ({path})"
        if not isinstance(facts, Mapping):
            wrong.append(f"{what}: not gathered")
        elif facts.get("exists") is False:
            wrong.append(f"{what}: does not exist")
        elif facts.get("exists") is None:
            wrong.append(f"{what}: cannot be looked at ({facts.get('error')})")
        else:
            problems = []
            if facts.get("type") != "file":
                problems.append(f"is a {facts.get('type')}, not a regular file")
            if facts.get("owner") not in owners:
                allowed = " or ".join(f"uid {o}" for o in sorted(owners))
                problems.append(f"is owned by uid {facts.get('owner')}, not {allowed}")
            elif name == KEY_SECRET and isinstance(uid, int) and uid != 0 and facts.get("owner") != uid:
                # the boot's wait and smoke completion read the key on the head, as the login node_facts ran as
                problems.append(
                    f"is read by the boot's wait and smoke completion as uid {uid} (the login, without become), "
                    f"which a file of uid {facts.get('owner')} with mode 0600 does not let it"
                )
            mode = _mode(facts.get("mode"))
            if mode is None or mode & ~SECRET_MODE_MAX:
                problems.append(f"has mode {facts.get('mode')}, more than 0600")
            if problems:
                wrong.append(f"{what}: {', '.join(problems)}")
    if wrong:
        return _line(SECRET_FILES, host, FAIL, f"{'; '.join(wrong)}; {SECRET_FIX}")
    owner = "root" if owners == {0} else f"root or uid {uid}"
    return _line(
        SECRET_FILES,
        host,
        PASS,
        f"{len(secrets)} secret file(s), each a regular file of {owner}, mode 0600 or stricter: "
        + ", ".join(sorted(secrets.values())),
    )


def _mode(text: Any) -> int | None:
    try:
        return int(str(text), 8)
    except ValueError:
        return None


def report(lines: Sequence[Mapping[str, str]]) -> list[str]:
    width = max((len(line["check"]) for line in lines), default=0)
    hosts = max((len(line["host"]) for line in lines), default=0)
    return [
        f"{line['status']:<4}  {line['check']:<{width}}  {line['host']:<{hosts}}  {line['message']}" for line in lines
    ]
