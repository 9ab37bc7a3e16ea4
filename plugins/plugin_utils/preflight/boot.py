# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot's preflight on the controller, in one pass over the facts every node gave in one round trip.

1. Bind the plan's one late input: what each node offers NCCL on its planned fabric ports (``nccl_names``,
   the fabric role's own rule, read from the same facts), so the plan that is judged is the one that starts.
2. Judge every node against that plan (``_preflight.preflight``: a line per check and node).
3. Say what each converging role would change there (the fabric's files, sysctls, ports and unit; the memory
   guard's difference, worked out by its role) and what pausing, arming and starting would do: the check
   mode's answer, and the real boot's plan of work, with nothing more asked of a node.

Plain data in and out; the ``boot_preflight`` action plugin reads the profile and rebuilds the plan.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.module_utils import _releases
from ansible_collections.dgxspark.cluster.plugins.module_utils._roce import nccl_names
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.checks import FAIL, PASS, SPEC_LABEL, WARN
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.checks import check_line as _line
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.converge import (
    difference,
    fabric_expectation_with,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.images import find_image


def discovered(facts: Mapping[str, Any], fabric: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Host to what its node offers NCCL on its planned ports (hca, socket_ifname, gid_index), from its facts;
    None for a node without usable fabric facts (the plan then keeps what the inventory says)."""
    found: dict[str, Any] = {}
    for host, share in fabric.items():
        node = facts.get(host)
        try:
            found[host] = nccl_names(host, list(share["fabric"]["interfaces"]), dict(node))[0]  # type: ignore[arg-type]
        except (KeyError, TypeError, AttributeError):
            found[host] = None
    return found


def fabric_differences(
    facts: Mapping[str, Any], fabric: Mapping[str, Mapping[str, Any]], settings: Mapping[str, Any]
) -> dict[str, list[str]]:
    """Host to what the fabric role would change on it (``_converge.difference``); empty: nothing.
    ``settings`` maps a host to the fabric role's ``_converge.FABRIC_SETTINGS`` there (absent: the role's defaults:
    the plan's ``fabric_fact_settings``)."""
    out: dict[str, list[str]] = {}
    for host, share in fabric.items():
        node = facts.get(host)
        if not isinstance(node, Mapping):
            out[host] = ["no node facts: the role must run to know"]
            continue
        out[host] = difference(node, fabric_expectation_with(share, settings.get(host) or {}, node))
    return out


def to_replace(plan: Mapping[str, Any], facts: Mapping[str, Any], as_planned: Mapping[str, bool]) -> dict[str, bool]:
    """Host to whether the boot recreates the container of its rank's name that is there: one that does not serve
    as planned (the preflight FAILs it unless the operator asked to replace it), and, when any rank must start,
    one that does (a tensor-parallel group starts together: the preflight's ``restart``)."""
    every = bool(as_planned) and all(as_planned.values())
    out: dict[str, bool] = {}
    for rank in plan["ranks"]:
        host = rank["host"]
        node = facts.get(host) if isinstance(facts.get(host), Mapping) else {}
        names = [c.get("name") for c in ((node.get("docker") or {}).get("containers") or [])]
        out[host] = plan["container_name"] in names and not every
    return out


def kernel_differences(lines: Sequence[Mapping[str, str]]) -> dict[str, list[str]]:
    """Host to what the kernel role would look at again: its preflight lines of the kernel and limits families
    that did not pass (a WARN the role may fix live; a FAIL stops the boot before that)."""
    out: dict[str, list[str]] = {}
    for line in lines:
        if line["check"] in ("kernel", "limits"):
            out.setdefault(line["host"], [])
            if line["status"] in ("WARN", "FAIL"):
                out[line["host"]].append(f"{line['check']}: {line['message']}")
    return out


def image_ids(plan: Mapping[str, Any], facts: Mapping[str, Any]) -> dict[str, str | None]:
    """Host to the ID of its rank's image on its node (None: not there)."""
    out: dict[str, str | None] = {}
    for rank in plan["ranks"]:
        node = facts.get(rank["host"]) if isinstance(facts.get(rank["host"]), Mapping) else {}
        images = ((node.get("docker") or {}).get("images")) or []
        out[rank["host"]] = (find_image(images, rank["image"]) or {}).get("id")
    return out


def _running_specs(plan: Mapping[str, Any], facts: Mapping[str, Any]) -> dict[str, str]:
    """Host to the spec label of its rank's container that runs there."""
    specs: dict[str, str] = {}
    for rank in plan["ranks"]:
        node = facts.get(rank["host"]) if isinstance(facts.get(rank["host"]), Mapping) else {}
        for item in ((node.get("docker") or {}).get("containers")) or []:
            if item.get("name") == plan["container_name"] and item.get("state") == "running":
                specs[rank["host"]] = str((item.get("labels") or {}).get(SPEC_LABEL, ""))
    return specs


def release(
    plan: Mapping[str, Any],
    profile_sha256: str,
    facts: Mapping[str, Any],
    candidate: bool = False,
    target: str | None = None,
    host_sha256: str | None = None,
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """What this boot means for the releases on the head, and the preflight's lines about it.

    The decision: ``first`` (no release yet: this boot's becomes the promoted one), ``promoted`` (the promoted
    release's ranks again, spec for spec, and its ``host`` section: ``host_sha256``, ``_releases.host_sha256``),
    ``candidate`` (another profile, asked for with ``candidate``: other ranks, or the same ranks with another host
    section, ``host_changed``), ``rollback`` (to release ``target``). Every change to what serves is a release:
    another profile without ``candidate`` FAILs ``release``, a change of the host section alone (the guard's
    floors, the helper services) too. A release recorded before host sections were hashed has none: then the
    same profile file is the same host section, and another file with the same ranks is judged a host change.
    Every boot also checks that the rollback target's images are on every node (``rollback-images``): a rollback
    must not find them gone."""
    head = plan["head"]
    node = facts.get(head) if isinstance(facts.get(head), Mapping) else {}
    known = node.get("releases")
    lines: list[dict[str, str]] = []
    if not isinstance(known, Mapping):
        line = _line("release", head, FAIL, "the head's releases were not read (node_facts' releases section)")
        return {"decision": None}, [line]
    for problem in known.get("problems") or []:
        lines.append(_line("release", head, WARN, f"not a release: {problem}"))
    summaries = {r["id"]: r for r in known.get("releases") or []}
    promoted = summaries.get(known.get("promoted") or "")
    specs = {r["host"]: r["spec_sha256"] for r in plan["ranks"]}
    decision: dict[str, Any] = {"promoted": promoted["id"] if promoted else None}
    if target:
        if target not in summaries:
            listing = ", ".join(summaries) or "none"
            lines.append(_line("release", head, FAIL, f"no release {target} on the head (known: {listing})"))
            return {**decision, "decision": None}, lines
        decision.update(decision="rollback", target=target)
        same = summaries[target]["spec_sha256"] == specs
        lines.append(
            _line(
                "release",
                head,
                PASS if same else WARN,
                f"rolls back to release {target}"
                + ("" if same else " (its ranks' specs differ from what it recorded: the nodes' NCCL names changed?)"),
            )
        )
    elif promoted is None:
        decision["decision"] = "first"
        lines.append(_line("release", head, PASS, "no release yet: this boot's becomes the first, promoted"))
    elif promoted["spec_sha256"] == specs and _same_host(promoted, profile_sha256, host_sha256):
        decision["decision"] = "promoted"
        lines.append(_line("release", head, PASS, f"serves the promoted release {promoted['id']}"))
    elif promoted["profile_sha256"] == profile_sha256 and promoted.get("shape") == plan.get("shape"):
        # the promoted profile and shape, rendered anew (a collection version that renders the ranks differently,
        # or other NCCL names on the nodes): still the promoted release, whose specs the steady phase updates
        decision.update(decision="promoted", respec=specs)
        lines.append(
            _line(
                "release",
                head,
                WARN,
                f"serves the promoted release {promoted['id']} (its profile and shape), whose ranks now render "
                "differently from what it recorded (this collection version, or the nodes' NCCL names): its specs "
                "are updated to these once it serves",
            )
        )
    elif candidate:
        decision["decision"] = "candidate"
        host_only = promoted["spec_sha256"] == specs
        said = f"serves a CANDIDATE, not the promoted release {promoted['id']} (asked for)"
        if host_only:  # the ranks are the promoted release's: the boot records the release though it starts nothing
            said += ": the same ranks, another host section (the guard's settings, the helper services)"
            kept = _serving_candidate(summaries, specs, host_sha256)
            if kept is None:
                decision["host_changed"] = True
            else:  # booted again while it is judged: that candidate serves already, nothing new to record
                said += f", the candidate {kept['id']} already recorded"
        lines.append(_line("release", head, WARN, said))
    else:
        decision["decision"] = None
        host_only = promoted["spec_sha256"] == specs
        lines.append(
            _line(
                "release",
                head,
                FAIL,
                f"the promoted release is {promoted['id']} (profile {str(promoted['profile_sha256'])[:12]}); this "
                f"profile ({profile_sha256[:12]}) is another"
                + (
                    ": its ranks are the same, spec for spec, but its host section (the guard's floors and graces, "
                    "the helper services, the kernel) differs, and every change to what serves is a "
                    "release"
                    if host_only
                    else ""
                )
                + ": boot it as a candidate (-e boot_candidate=true, as playbooks/promote.yml does), or go back with "
                "playbooks/rollback.yml",
            )
        )
    lines += _rollback_images(summaries, known, plan, facts, target)
    return decision, lines


def _serving_candidate(
    summaries: Mapping[str, Mapping[str, Any]], specs: Mapping[str, str], host_sha256: str | None
) -> Mapping[str, Any] | None:
    """The newest candidate (not retired) whose ranks and host section are these, if one is recorded."""
    if host_sha256 is None:
        return None
    same = [
        r
        for r in summaries.values()
        if r.get("state") == "candidate" and r["spec_sha256"] == specs and r.get("host_sha256") == host_sha256
    ]
    return max(same, key=lambda r: str(r.get("created"))) if same else None


def _same_host(promoted: Mapping[str, Any], profile_sha256: str, host_sha256: str | None) -> bool:
    """Whether this profile's host section is the promoted release's (``host_sha256`` None: not judged)."""
    if host_sha256 is None:
        return True
    kept = promoted.get("host_sha256")
    if kept is None:  # recorded before host sections were hashed: only the same profile file is surely the same
        return promoted.get("profile_sha256") == profile_sha256
    return kept == host_sha256


def _rollback_images(
    summaries: Mapping[str, Mapping[str, Any]],
    known: Mapping[str, Any],
    plan: Mapping[str, Any],
    facts: Mapping[str, Any],
    target: str | None,
) -> list[dict[str, str]]:
    """``rollback-images``: the release a rollback would go to (``target``, or the previous promoted one while
    the promoted serves, or the promoted one while another serves) has its image on every node."""
    promoted, before = summaries.get(known.get("promoted") or ""), summaries.get(known.get("previous") or "")
    serving_specs = _running_specs(plan, facts)
    serves_promoted = promoted is not None and promoted["spec_sha256"] == serving_specs
    chosen = summaries.get(target or "") or (promoted if promoted and serving_specs and not serves_promoted else before)
    if chosen is None:
        return [_line("rollback-images", plan["head"], PASS, "no release to roll back to yet")]
    lines = []
    for rank in plan["ranks"]:
        host = rank["host"]
        node = facts.get(host) if isinstance(facts.get(host), Mapping) else {}
        have = {i.get("id") for i in ((node.get("docker") or {}).get("images")) or []}
        wanted = (chosen.get("images") or {}).get(host)
        if wanted is None:
            lines.append(_line("rollback-images", host, WARN, f"release {chosen['id']} recorded no image for {host}"))
        elif wanted in have:
            lines.append(_line("rollback-images", host, PASS, f"release {chosen['id']}'s image {wanted[:19]} is here"))
        else:
            lines.append(
                _line(
                    "rollback-images",
                    host,
                    FAIL,
                    f"release {chosen['id']} ({chosen['image']}) needs image {wanted[:19]}, which is gone from this "
                    f"node: put it back with playbooks/images.yml -e dgxspark_release={chosen['id']} (the "
                    "collection never removes the images of the promoted release or the previous one)",
                )
            )
    return lines


def release_record(
    planned: Mapping[str, Any],
    plan: Mapping[str, Any],
    decision: Mapping[str, Any],
    images: Mapping[str, str | None],
    by: str,
    now: float,
) -> dict[str, Any] | None:
    """The release this boot records once it serves (``first``: promoted at once; ``candidate``), or None when
    it records none (the promoted release again, a rollback to a known one, a refused boot)."""
    if decision.get("decision") not in ("first", "candidate"):
        return None
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    sha = str(plan["profile_sha256"])
    history = [{"event": "booted", "at": created, "by": by}]
    if decision["decision"] == "first":
        history.append({"event": "promoted", "at": created, "by": by, "detail": "the first release"})
    return {
        "schema_version": _releases.SCHEMA_VERSION,
        "id": _releases.release_id(created, sha),
        "state": "promoted" if decision["decision"] == "first" else "candidate",
        "created": created,
        "by": by,
        "profile": {"path": str(planned.get("src")), "sha256": sha, "text": str(planned.get("text", ""))},
        "shape": plan["shape"],
        "plan": dict(plan),
        "spec_sha256": {rank["host"]: rank["spec_sha256"] for rank in plan["ranks"]},
        "host_sha256": _releases.host_sha256(planned.get("profile") or {}),
        "image": plan["ranks"][0]["image"],
        "images": dict(images),
        "evidence": {},
        "history": history,
    }


def helpers_to_pause(
    plan: Mapping[str, Any], profile: Mapping[str, Any], facts: Mapping[str, Any]
) -> dict[str, list[str]]:
    """Host to the profile's helper services that run there now (its facts): what its start phase pauses."""
    helpers = list((profile.get("host") or {}).get("helper_services") or [])
    found: dict[str, list[str]] = {}
    for rank in plan["ranks"]:
        node = facts.get(rank["host"]) if isinstance(facts.get(rank["host"]), Mapping) else {}
        units = ((node.get("services") or {}).get("units")) or {}
        found[rank["host"]] = [h for h in helpers if (units.get(h) or {}).get("active_state") == "active"]
    return found


def would_do(
    plan: Mapping[str, Any],
    profile: Mapping[str, Any],
    facts: Mapping[str, Any],
    as_planned: Mapping[str, bool],
    differences: Mapping[str, Mapping[str, Sequence[str]]],
    restart: Sequence[str] = (),
    replace: bool = False,
) -> list[str]:
    """What a boot would do on every node, a line or more per node: the roles' differences, the helpers it would
    pause, the guard's phase, and the rank it would start, replace (``replace``: boot_replace) or leave alone."""
    pausing = helpers_to_pause(plan, profile, facts)
    lines: list[str] = []
    for rank in plan["ranks"]:
        host = rank["host"]
        node = facts.get(host) if isinstance(facts.get(host), Mapping) else {}
        for role, changes in (differences.get(host) or {}).items():
            if changes:
                lines.append(f"{host}: the {role} would change (check mode): " + "; ".join(changes))
            else:
                lines.append(f"{host}: the {role} is as planned: left alone")
        running = pausing[host]
        guard = node.get("memguard") or {}
        lines.append(
            f"{host}: "
            + (f"would pause {', '.join(running)}" if running else "no helper to pause")
            + "; would switch the memory guard to startup "
            + (f"from {guard.get('phase') or '?'}" if guard.get("installed") else "(it is installed by a real run)")
        )
        lines.append(
            f"rank {rank['rank']} ({host}): "
            + (
                "already serves as planned: left alone"
                if as_planned.get(host) and host not in restart and not replace
                else (
                    "serves as planned, would be replaced (boot_replace) by "
                    if as_planned.get(host) and replace
                    else "serves as planned, would restart with the other ranks "
                    if host in restart
                    else "would start "
                )
                + f"{plan['container_name']} ({rank['image']}, spec {rank['spec_sha256'][:12]})"
            )
        )
    every = bool(as_planned) and all(as_planned.values()) and not replace
    lines.append(
        "check mode: the plan and the preflight passed. "
        + ("Every rank already serves as planned, so a boot would change nothing. " if every else "")
        + "Nothing was changed on any node or on this controller, and nothing more was asked of the nodes."
    )
    return lines
