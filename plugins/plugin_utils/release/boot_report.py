# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot's last words: where the cluster serves and how it stands, or why it failed and what the undo did.

Pure functions over what the boot role's tasks registered on each host (``boot_rank``,
``boot_served``, ``boot_smoke``, ``boot_steadied``; ``boot_failure``, ``boot_stopped``, ``boot_undone``),
so that the report's wording is tested without a cluster.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

# The undo's node_phase step (boot_undone): each of its error lines starts with the step that failed.
UNDO_STEPS = {
    "guard": "the memory guard did not go idle",
    "helpers": "a helper service did not resume",
}


def _get(host: Mapping[str, Any], key: str, default: Any = None) -> Any:
    value = host.get(key, default)
    return default if value is None else value


def guard_summary(hosts: Sequence[Mapping[str, Any]]) -> tuple[str, list[str]]:
    """``memory guard: ...`` and the hosts whose guard is tripped; never "steady" while one is. Each host's guard
    state is what it answered to the switch to steady (``boot_steadied.guard``)."""
    tripped: list[str] = []
    phases: dict[str, list[str]] = {}
    for host in hosts:
        name = str(host.get("inventory_hostname"))
        state = _get(_get(host, "boot_steadied", {}), "guard", {})
        if not isinstance(state, Mapping) or not state:
            phases.setdefault("not answering", []).append(name)
            continue
        trip = state.get("tripped")
        if trip:
            tripped.append(name)
            phases.setdefault(f"TRIPPED ({trip.get('reason')})", []).append(name)
        else:
            phases.setdefault(str(state.get("phase")), []).append(name)
    if len(phases) == 1 and not tripped:
        return f"memory guard: {next(iter(phases))} on every node", tripped
    return "memory guard: " + "; ".join(f"{what} on {', '.join(names)}" for what, names in phases.items()), tripped


PHASES = (
    ("plan", "plan and preflight"),
    ("converge", "converge"),
    ("create", "create"),
    ("workers", "workers"),
    ("head", "head"),
    ("wait", "wait and smoke"),
    ("finish", "steady"),
    ("end", ""),
)


def rfc3339(text: Any) -> float | None:
    """Docker's RFC 3339 time (up to nine fraction digits, UTC) in epoch seconds; None when it is not one."""
    if not isinstance(text, str) or not text.endswith("Z") or text.startswith("0001-"):
        return None
    whole, _dot, fraction = text[:-1].partition(".")
    try:
        moment = datetime.datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.UTC)
        return moment.timestamp() + (float(f"0.{fraction}") if fraction.isdigit() else 0.0)
    except ValueError:
        return None


def startup_figures(head: Mapping[str, Any]) -> str | None:
    """``startup: ...``: from the head's container start (Docker's, the head's clock) to its API port open,
    HTTP ready and the smoke completion's first token, all on the head's clock."""
    served = _get(head, "boot_served", {})
    start = rfc3339(served.get("started_at"))
    if start is None:
        return None
    parts = []
    for key, what in (("port_open_at", "port open"), ("ready_at", "HTTP ready")):
        if served.get(key) is not None:
            parts.append(f"{what} {float(served[key]) - start:.1f} s")
    smoke = _get(head, "boot_smoke", {})
    if smoke.get("sent_at") is not None and smoke.get("ttft") is not None:
        parts.append(f"first token {float(smoke['sent_at']) + float(smoke['ttft']) - start:.1f} s")
    return "startup (from the head's engine start): " + ", ".join(parts) if parts else None


def phase_times(hosts: Sequence[Mapping[str, Any]], ended: float | None = None) -> str | None:
    """``boot phases: ...``: each phase's wall time on the controller's clock, from the earliest host's mark;
    ``ended`` (when the report is made) is the last mark, unless a host marked ``end`` itself."""
    marks: dict[str, float] = {} if ended is None else {"end": float(ended)}
    for host in hosts:
        for key, value in (_get(host, "boot_clock", {}) or {}).items():
            marks[key] = min(float(value), marks.get(key, float("inf")))
    known = [(key, what) for key, what in PHASES if key in marks]
    if len(known) < 2:
        return None
    steps = zip(known, known[1:], strict=False)
    parts = [f"{what} {marks[following[0]] - marks[key]:.1f} s" for (key, what), following in steps]
    return f"boot phases: {', '.join(parts)}; in all {marks[known[-1][0]] - marks[known[0][0]]:.1f} s"


def startup_overdue(hosts: Sequence[Mapping[str, Any]], wait: Any = None) -> list[str]:
    """``WARN memory guard: ...``, a line per node whose guard recorded this load's startup phase overdue (it ran
    over ``host.startup_memguard_wait_seconds``, ``wait``): the guard judged it by the steady floor and grace from
    then on and did not stop it (a slow load is not killed for being slow), but the operator should know how long
    it took. From each guard's answer to the switch to steady (``startup_overdue``, ``startup_seconds``)."""
    limit = f" ({wait:g} s)" if isinstance(wait, (int, float)) and not isinstance(wait, bool) else ""
    lines = []
    for host in hosts:
        state = _get(_get(host, "boot_steadied", {}), "guard", {})
        if not isinstance(state, Mapping) or state.get("startup_overdue") is not True:
            continue
        took = state.get("startup_seconds")
        how_long = (
            f"took {took:.1f} s"
            if isinstance(took, (int, float)) and not isinstance(took, bool)
            else "took an unrecorded time (its guard predates startup_seconds)"
        )
        lines.append(
            f"WARN memory guard: the load on {host.get('inventory_hostname')} {how_long}, over "
            f"host.startup_memguard_wait_seconds{limit}: judged by the steady floor and grace from then on, not "
            "stopped (a slow load is not killed for being slow); find out why it was slow"
        )
    return lines


def boot_report(
    hosts: Sequence[Mapping[str, Any]],
    plan: Mapping[str, Any],
    prompt: str,
    startup_wait: Any = None,
    ended: float | None = None,
) -> list[str]:
    """The report of a boot that serves: endpoint, ranks, guard (and a load over the startup wait), sample
    completion, startup figures and phase times (``ended``: when the boot ended, epoch seconds)."""
    by_rank = sorted(hosts, key=lambda h: int(_get(h, "boot_rank", {}).get("rank", 0)))
    head = next((h for h in by_rank if h.get("inventory_hostname") == plan["head"]), by_rank[0])
    port = plan["ranks"][0]["api_port"]
    served = _get(head, "boot_served", {})
    address = head.get("ansible_host") or plan["head"]
    # where clients reach the API (the plan's container.api: its scheme and address), else the head's ansible_host
    url = (plan.get("api") or {}).get("api_url") or f"http://{address}:{port}/v1"
    if served.get("models"):
        ready = f" (ready after {served.get('seconds')} s of waiting)" if served.get("seconds") is not None else ""
        endpoint = f"endpoint: {url} serving {', '.join(served['models'])}{ready}"
    else:
        endpoint = f"endpoint: {url} (already serving as planned: nothing was started)"
    ranks = "; ".join(
        f"{_get(h, 'boot_rank', {}).get('rank')} {h.get('inventory_hostname')} "
        f"{_get(_get(h, 'boot_steadied', {}), 'rank', {}).get('status') or 'not answering'}"
        for h in by_rank
    )
    lines = [endpoint, f"ranks: {ranks}", guard_summary(by_rank)[0], *startup_overdue(by_rank, startup_wait)]
    smoke = _get(head, "boot_smoke", {})
    choices = (smoke.get("json") or {}).get("choices") if isinstance(smoke, Mapping) else None
    if choices:
        lines.append(f'sample completion ("{prompt}"): {str(choices[0].get("text", "")).strip()}')
    elif smoke.get("text") is not None:
        lines.append(f'sample completion ("{prompt}"): {str(smoke["text"]).strip()}')
    return lines + [line for line in (startup_figures(head), phase_times(by_rank, ended)) if line]


def boot_outcome(
    hostvars: Mapping[str, Mapping[str, Any]], hosts: Sequence[str], play_hosts: Sequence[str] | None = None
) -> dict[str, list[str]]:
    """Which of the boot's ``hosts`` failed and which stopped answering, computed once for every phase: ``lost``,
    a host gone from the play (Ansible dropped it as unreachable) or one a phase found unreachable and kept
    (``boot_unreachable``, where the task ignored it so that the others' undo still runs); ``failed``, a host with
    a ``boot_failure`` that is not lost. Without ``play_hosts`` (a play over some of the hosts: the workers', the
    head's), only what the phases recorded counts."""
    present = set(hosts if play_hosts is None else play_hosts)
    lost, failed = [], []
    for host in hosts:
        variables = hostvars[host] if host in hostvars else {}
        if host not in present or bool(variables.get("boot_unreachable")):
            lost.append(host)
        elif variables.get("boot_failure") is not None:
            failed.append(host)
    return {"failed": failed, "lost": lost, "any": failed + lost}


def boot_undo_report(hosts: Sequence[Mapping[str, Any]], failed: Sequence[str], lost: Sequence[str]) -> list[str]:
    """Why the boot failed, and what its undo did on every node that still answered."""
    problems: list[str] = []
    for host in hosts:
        name = str(host.get("inventory_hostname"))
        stopped = _get(host, "boot_stopped", {})
        if stopped.get("failed"):
            problems.append(f"{name}: its ranks were not all stopped: {stopped.get('msg')}")
        undone = _get(host, "boot_undone", {})
        for line in undone.get("errors") or ([undone.get("msg") or "failed"] if undone.get("failed") else []):
            step, _colon, why = str(line).partition(": ")
            if step in UNDO_STEPS:
                problems.append(f"{name}: {UNDO_STEPS[step]}: {why}")
            else:  # the step itself could not run (the module did not start)
                problems.append(f"{name}: the guard was not left idle nor the helpers resumed: {line}")
    for name in lost:
        problems.append(
            f"{name}: stopped answering during the boot, so nothing could be undone there: its rank may still run; "
            "once it answers again, the next boot finds its journal and undoes it first (or run playbooks/stop.yml)"
        )
    causes = {str(h.get("inventory_hostname")): h.get("boot_failure") for h in hosts}
    head = (
        "the boot failed; every rank was stopped and removed (its exit code and log tail kept on its node), "
        "the helpers resumed and the memory guard left idle:"
        if not problems
        else "the boot failed, and its undo did not finish everywhere:"
    )
    lines = [head]
    lines += [f"{name}: {causes.get(name) or 'failed'}" for name in failed]
    lines += [f"{name}: did not answer" for name in lost]
    return lines + problems


# The release module's operation for each of the preflight's release decisions (boot_preflight's ``release``).
RELEASE_OPERATIONS = {"first": "record", "candidate": "record", "promoted": "event", "rollback": "promote"}


def release_write(decision: Mapping[str, Any], plan: Mapping[str, Any]) -> dict[str, Any]:
    """What the steady phase asks the head's ``release`` module to write for the preflight's release ``decision``
    (``first`` and ``candidate`` record this boot's release, ``promoted`` adds a ``served again`` event to the
    promoted one, ``rollback`` promotes the release it went back to), the plan that serves given: the module's
    arguments, a key left out where the module is given none. The record is the preflight's, with the plan and each
    rank's spec hash by host."""
    kind = decision.get("decision")
    if kind not in RELEASE_OPERATIONS:
        raise ValueError(f"no release is written for the decision {kind!r} (one of {', '.join(RELEASE_OPERATIONS)})")
    written: dict[str, Any] = {
        "operation": RELEASE_OPERATIONS[kind],
        "detail": "rolled back to it (playbooks/rollback.yml)" if kind == "rollback" else "",
        "by": decision.get("by"),
    }
    if kind in ("promoted", "rollback"):
        written["id"] = decision.get("target") or decision.get("promoted")
    if decision.get("record"):
        specs = {rank["host"]: rank["spec_sha256"] for rank in plan["ranks"]}
        written["record"] = {**decision["record"], "plan": plan, "spec_sha256": specs}
    if kind == "promoted":
        written["event"] = "served again" + (", re-rendered" if "respec" in decision else "")
        if "respec" in decision:
            written["spec_sha256"] = decision["respec"]
    return written


def release_line(decision: Mapping[str, Any], written: Sequence[str] = ()) -> str:
    """``release: ...``: what the boot made of the releases (its decision), with the files the head's ``release``
    module ``written``."""
    files = ", ".join(str(path) for path in written)
    promoted = decision.get("promoted")
    said = {
        "first": f"the first release, {files}, promoted",
        "candidate": f"a CANDIDATE, {files} (promote.yml judges it; rollback.yml goes back to {promoted})",
        "promoted": f"the promoted release {promoted}",
        "rollback": f"rolled back to {decision.get('target', '')}, promoted again",
    }
    return "release: " + said.get(str(decision.get("decision")), "none recorded")


def steady_report(
    hostvars: Mapping[str, Mapping[str, Any]],
    hosts: Sequence[str],
    planned: Mapping[str, Any],
    release: Mapping[str, Any],
    prompt: str,
    ended: float | None = None,
) -> list[str]:
    """The report of a boot that serves (:func:`boot_report` over the ``hosts``' variables, ``planned`` the boot's
    plan with its profile, whose ``host.startup_memguard_wait_seconds`` the overdue lines name), then the
    :func:`release_line` of the preflight's ``release`` decision with the files the head's release step wrote
    (its ``boot_released``)."""
    plan = planned["plan"]
    wait = ((planned.get("profile") or {}).get("host") or {}).get("startup_memguard_wait_seconds")
    head = hostvars[plan["head"]] if plan["head"] in hostvars else {}
    written = (head.get("boot_released") or {}).get("written") or []
    lines = boot_report([hostvars[host] for host in hosts], plan, prompt, wait, ended)
    return [*lines, release_line(release, written)]


def guard_failure(guard: Mapping[str, Any] | None, host: str) -> str:
    """Why the boot is not steady on ``host`` after the switch to steady, from its guard's answer
    (``boot_steadied.guard``): the guard is tripped, or its own health is not ok (its peer listener down, a peer's
    clock skewed, writes that fail). Empty when it is steady: a guard that reports no health is taken as healthy."""
    guard = guard or {}
    tripped = guard.get("tripped")
    if tripped is not None:
        reason = tripped.get("reason") if isinstance(tripped, Mapping) else tripped
        return (
            f"{host}: the memory guard is TRIPPED ({reason}); the boot is not steady. "
            "Read its decisions, then clear it (-e boot_clear_trip=true or the memguard role's clear entry point)."
        )
    health = guard.get("health") or {}
    if health.get("ok", True) is False:
        problems = "; ".join(str(p) for p in health.get("problems") or []) or "no problem named"
        return (
            f"{host}: the memory guard is up but not healthy after the switch to steady: {problems}. Fix them (the "
            "memguard role's README: the listener, peers, writes, clocks); dgxspark-memguard status prints its state."
        )
    return ""
