# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot's preflight: every node's facts (one node_facts call each) against the plan, on one report.

One line per check and per node, PASS, FAIL, WARN or SKIP with the reason; a check skipped on purpose
says so and what it would have been. Nothing here touches a node: it reads what node_facts gathered.

Checks (names for ``skip``): ``node-facts`` (the node answered), ``docker`` (its engine answers),
``mem-available`` (the profile's ``host.min_mem_available_gib``; seed 000: 100 GiB), ``previous-container``
(none of the rank's name, unless it already serves exactly as planned or the operator asked to replace
it), ``image-present`` (the image is on the node: boots never pull), ``image-id`` (the same image ID on
every node), ``kernel`` and ``limits`` (the kernel role's findings: release, pages, memory saver, command
line; what dockerd can grant), ``fabric-ports`` (the ConnectX ports have carrier), ``weights`` (the
weights path exists).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils import _kernel

GIB = 1024**3
PASS, FAIL, WARN, SKIP = "PASS", "FAIL", "WARN", "SKIP"
CHECKS = (
    "node-facts",
    "docker",
    "mem-available",
    "previous-container",
    "image-present",
    "image-id",
    "kernel",
    "limits",
    "fabric-ports",
    "weights",
)


def _line(check: str, host: str, status: str, message: str) -> dict[str, str]:
    return {"check": check, "host": host, "status": status, "message": message}


def preflight(
    facts: Mapping[str, Any],
    plan: Mapping[str, Any],
    profile: Mapping[str, Any],
    replace: bool = False,
    skip: Sequence[str] = (),
) -> dict[str, Any]:
    """Every check on every rank's host; ``failed`` when any check FAILs."""
    unknown = sorted(set(skip) - set(CHECKS))
    if unknown:
        raise ValueError(f"unknown preflight checks to skip: {', '.join(unknown)} (known: {', '.join(CHECKS)})")
    host_section = profile.get("host", {})
    floor = float(host_section.get("min_mem_available_gib", 100))
    expect = {**(host_section.get("kernel") or {})}
    lines: list[dict[str, str]] = []
    image_ids: dict[str, str] = {}
    for rank in plan["ranks"]:
        host = rank["host"]
        node = facts.get(host)
        if not isinstance(node, Mapping) or "memory" not in node:
            lines.append(_line("node-facts", host, FAIL, f"rank {rank['rank']}: no node facts (did it answer?)"))
            continue
        lines.append(
            _line("node-facts", host, PASS, f"rank {rank['rank']}: facts gathered in {node.get('elapsed_ms')} ms")
        )
        lines += _memory(host, node, floor)
        docker = node.get("docker") or {}
        if not docker.get("present"):
            lines.append(_line("docker", host, FAIL, f"the Docker engine does not answer: {docker.get('error')}"))
        else:
            lines.append(_line("docker", host, PASS, f"Docker {(docker.get('engine') or {}).get('version')}"))
            lines.append(_previous(host, rank, docker, replace))
            image_line, image_id = _image(host, rank, docker)
            lines.append(image_line)
            if image_id:
                image_ids[host] = image_id
        lines += _kernel_lines(host, node, {**expect, "ulimits": rank.get("ulimits") or None})
        lines.append(_fabric(host, node))
        lines.append(_weights(host, node, host_section.get("weights_path")))
    lines += _image_ids(image_ids, [r["host"] for r in plan["ranks"]])
    lines = [_skipped(line) if line["check"] in skip else line for line in lines]
    failed = [line for line in lines if line["status"] == FAIL]
    return {"lines": lines, "failed": bool(failed), "failures": failed, "report": report(lines)}


def _skipped(line: dict[str, str]) -> dict[str, str]:
    return {**line, "status": SKIP, "message": f"skipped on purpose (would be {line['status']}: {line['message']})"}


def _memory(host: str, node: Mapping[str, Any], floor: float) -> list[dict[str, str]]:
    available = (node.get("memory") or {}).get("mem_available_bytes")
    if available is None:
        return [_line("mem-available", host, FAIL, "MemAvailable unknown (could not read /proc/meminfo)")]
    status = PASS if available >= floor * GIB else FAIL
    return [_line("mem-available", host, status, f"MemAvailable {available / GIB:.1f} GiB, needs >= {floor:g} GiB")]


def _previous(host: str, rank: Mapping[str, Any], docker: Mapping[str, Any], replace: bool) -> dict[str, str]:
    name = rank["container_name"]
    found = next((c for c in docker.get("containers", []) if c.get("name") == name), None)
    if found is None:
        return _line("previous-container", host, PASS, f"no container named {name}")
    same = (found.get("labels") or {}).get("dgxspark.cluster.spec_sha256") == rank["spec_sha256"]
    state = found.get("state")
    if state == "running" and same:
        return _line("previous-container", host, PASS, f"{name} already runs exactly as planned: left alone")
    what = f"{name} is {state} with {'the planned' if same else 'another'} spec"
    if replace:
        return _line("previous-container", host, WARN, f"{what}: it will be replaced (asked for)")
    return _line(
        "previous-container",
        host,
        FAIL,
        f"{what}; remove it, or boot with -e dgxspark_boot_replace=true to replace it",
    )


def _image(host: str, rank: Mapping[str, Any], docker: Mapping[str, Any]) -> tuple[dict[str, str], str | None]:
    image = rank["image"]
    for item in docker.get("images", []):
        if image in item.get("tags", []):
            return _line("image-present", host, PASS, f"{image} is {item.get('id')}"), item.get("id")
    return (
        _line("image-present", host, FAIL, f"{image} is not on this node (a boot never pulls: docker load it)"),
        None,
    )


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


def _weights(host: str, node: Mapping[str, Any], path: str | None) -> dict[str, str]:
    if not path:
        return _line("weights", host, SKIP, "the profile names no host.weights_path")
    disk = node.get("disk") or {}
    if not disk.get("exists"):
        return _line("weights", host, FAIL, f"{path} does not exist on this node")
    free = disk.get("available_bytes")
    return _line("weights", host, PASS, f"{path} exists ({(free or 0) / GIB:.0f} GiB free there)")


def report(lines: Sequence[Mapping[str, str]]) -> list[str]:
    width = max((len(line["check"]) for line in lines), default=0)
    hosts = max((len(line["host"]) for line in lines), default=0)
    return [
        f"{line['status']:<4}  {line['check']:<{width}}  {line['host']:<{hosts}}  {line['message']}" for line in lines
    ]
