# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Recovery after a guard trip or a rank exit (``playbooks/recover.yml``, docs/releases.md): why the cluster does
not serve, and what to do about it, decided on the controller from one ``node_facts`` look at every node.

The evidence, per node: the collection's rank containers (found by their label: state, exit code, OOM kill, log
tail), the newest records a stop or a boot's undo kept of the ranks it removed, and the memory guard's trip. The
attempts are counted in the promoted release's history: every attempt adds a ``recover`` event ("attempt N of M:
cause") before it boots, and a boot that serves adds another event after it, which ends the count.

Causes, in the order they are judged:

- ``not-answering``: a node did not answer, or its Docker engine could not be asked: nothing can be judged, and a
  boot could not pass its preflight. Refused.
- ``no-release``: there is no promoted release to boot again. Refused.
- ``memory``: a guard tripped, or the kernel's OOM killer ended a rank. Refused unless the operator overrides it
  (a memory trip needs a changed profile, through promote.yml, or an explicit override, which clears the trip).
- ``interrupted-boot``: a boot whose controller died left its journal on a node (what it paused, armed and
  started). recover.yml undoes it first whatever it decides; then it boots the promoted release again.
- ``interrupted-window``: the promoted release's last event opened a multimodal window (playbooks/window.yml) and
  nothing followed: its controller died before serving was restored, and no rank runs. Booted again (the boot's
  preflight FAILs while the window's job still runs: inference and the window never overlap).
- ``rank-exit``: a rank container exited (its exit code and last log lines are the cause). Booted again.
- ``attempt-failed``: no rank container is left and the last event is a recovery attempt: its boot failed (its
  undo removed the ranks; their records say why). Booted again.
- ``serving``: every rank runs. Nothing to do.
- ``stopped``: no rank container anywhere and nothing failed: the cluster was stopped on purpose (stop.yml, or a
  boot's undo after a boot an operator ran). Nothing to do: recovery never starts a stopped cluster.

A boot is bounded: after ``max_attempts`` attempts without serving, recovery gives up loudly until reset; between
attempts it backs off (``backoff_s``, doubled after each attempt), and a run inside the backoff only says when
the next attempt may be. No loop runs anywhere: an AWX schedule (or the operator) runs recover.yml again.

No Ansible imports; the ``dgxspark.cluster.recover_decision`` filter calls :func:`decide`.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.module_utils._journal import said as journal_said
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.release import window as _window

EVENT = "recover"
CAUSES = (
    "not-answering",
    "no-release",
    "memory",
    "interrupted-boot",
    "interrupted-window",
    "rank-exit",
    "attempt-failed",
    "serving",
    "stopped",
)
ACTIONS = ("boot", "refuse", "wait", "none")
_ATTEMPT = re.compile(r"^attempt (\d+) of (\d+)\b")
# how many of a rank's last log lines the report repeats
TAIL_LINES = 8


@dataclass(frozen=True)
class Settings:
    max_attempts: int = 3
    """Attempts without serving before recovery gives up (until ``reset``)."""
    backoff_s: float = 120.0
    """The wait after the first failed attempt; doubled after each further one."""
    after_memory_trip: bool = False
    """Boot again after a memory trip (the trip is cleared): the operator's explicit override."""
    try_now: bool = False
    """Attempt now, inside the backoff."""
    reset: bool = False
    """Count the attempts from zero again (after giving up)."""

    def check(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"recover_max_attempts must be 1 or more, found {self.max_attempts}")
        if self.backoff_s < 0:
            raise ValueError(f"recover_backoff_s must be 0 or more seconds, found {self.backoff_s}")


def _time(text: Any) -> datetime.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def _iso(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def previous_attempts(promoted: Mapping[str, Any] | None) -> tuple[int, str | None]:
    """How many recovery attempts since the promoted release last served (its last event a ``recover`` one says
    "attempt N of M"), and when the last one was."""
    last = (promoted or {}).get("last_event") or {}
    if last.get("event") != EVENT:
        return 0, None
    match = _ATTEMPT.match(str(last.get("detail") or ""))
    return (int(match.group(1)) if match else 1), last.get("at")


def _rank_line(host: str, record: Mapping[str, Any], what: str) -> list[str]:
    code, finished = record.get("exit_code"), record.get("finished_at")
    how = "killed by the kernel's OOM killer" if record.get("oom_killed") else f"exited with code {code}"
    when = f" at {finished}" if finished and not str(finished).startswith("0001-") else ""
    lines = [f"{host}: {what} {record.get('name')} (rank {record.get('rank')}) {how}{when}"]
    tail = [str(line) for line in (record.get("log_tail") or [])][-TAIL_LINES:]
    if tail:
        lines.append(f"  its last {len(tail)} log lines:")
        lines.extend(f"    {line}" for line in tail)
    return lines


def _trip_line(host: str, tripped: Mapping[str, Any]) -> str:
    peer = f" (on word from {tripped['from_peer']})" if tripped.get("from_peer") else ""
    samples = tripped.get("samples") or []
    kept = f"; {len(samples)} samples kept" if samples else ""
    when = tripped.get("time_utc") or tripped.get("time")
    return f"{host}: memory guard tripped at {when}{peer}: {tripped.get('reason')}{kept}"


def decide(
    facts: Mapping[str, Any],
    hosts: Sequence[str],
    head: str,
    now: str,
    settings: Settings = Settings(),
) -> dict[str, Any]:
    """What recovery does. ``facts``: host to its registered ``node_facts`` answer (``ranks``, ``memguard``,
    ``releases`` sections; an unreachable or failed answer as Ansible registered it); ``hosts``: every node of
    the cluster; ``head``: the head (the releases are kept there); ``now``: ISO 8601 UTC time."""
    settings.check()
    moment = _time(now)
    if moment is None:
        raise ValueError(f"now must be an ISO 8601 time, found {now!r}")
    lines: list[str] = []
    silent: list[str] = []
    nodes: dict[str, Mapping[str, Any]] = {}
    for host in hosts:
        answer = facts.get(host) or {}
        node = answer.get("node") if isinstance(answer, Mapping) else None
        if answer.get("unreachable") or answer.get("failed") or not isinstance(node, Mapping):
            why = answer.get("msg") or "no answer"
            silent.append(host)
            lines.append(f"{host}: not answering ({str(why).splitlines()[0] if str(why) else 'no answer'})")
            continue
        error = (node.get("ranks") or {}).get("error")
        if error:
            silent.append(host)
            lines.append(f"{host}: its rank containers could not be read: {error}")
            continue
        nodes[host] = node

    releases = (nodes.get(head) or {}).get("releases") or {}
    promoted_id = releases.get("promoted")
    promoted = next((r for r in releases.get("releases") or [] if r.get("id") == promoted_id), None)
    done, last_at = previous_attempts(promoted)
    if settings.reset:
        done = 0

    memory: list[str] = []
    on_word: list[str] = []
    interrupted: list[str] = []
    interrupted_hosts: list[str] = []
    exited: list[str] = []
    running: list[str] = []
    records: list[str] = []
    for host, node in nodes.items():
        tripped = (node.get("memguard") or {}).get("tripped")
        if isinstance(tripped, Mapping):
            # the guard that tripped on its own is the cause; those that stopped on its word come after it
            (on_word if tripped.get("from_peer") else memory).append(_trip_line(host, tripped))
        journal = node.get("journal") or {}
        if journal.get("open"):
            interrupted.append(f"{host}: {journal_said(dict(journal))}")
            interrupted_hosts.append(host)
        ranks = node.get("ranks") or {}
        for container in ranks.get("containers") or []:
            if container.get("running"):
                running.append(host)
            else:
                lines_here = _rank_line(host, container, "rank container")
                (memory if container.get("oom_killed") else exited).extend(lines_here)
        for record in (ranks.get("records") or [])[:1]:
            records.extend(_rank_line(host, record, f"last removed ({record.get('path')}):"))
    memory += on_word
    if running and promoted is not None:
        # a tensor-parallel cluster serves with every rank or not at all: a rank that is gone is a failed one
        for host in sorted(set(promoted.get("spec_sha256") or {}) & set(nodes)):
            if not (nodes[host].get("ranks") or {}).get("containers"):
                exited.append(f"{host}: no rank container, while other ranks run (the promoted release has one here)")

    window = _window.is_open(promoted) and not running
    cause, action = _judge(silent, promoted, memory, interrupted, exited, running, done, settings, window)
    clear_trip = cause == "memory" and settings.after_memory_trip
    attempt = done + 1
    next_at = None
    if action == "boot" and done >= settings.max_attempts:
        action = "refuse"
        cause_line = (
            f"gave up after {done} attempts without serving (the last at {last_at}): look at the cause below, fix "
            "it, then run recover.yml again with -e recover_reset=true"
        )
    elif action == "boot" and done and not settings.try_now:
        due = (_time(last_at) or moment) + datetime.timedelta(seconds=settings.backoff_s * 2 ** (done - 1))
        if moment < due:
            action, next_at = "wait", _iso(due)
            cause_line = (
                f"attempt {attempt} of {settings.max_attempts} not before {next_at} (backing off "
                f"{settings.backoff_s * 2 ** (done - 1):g} s after attempt {done}; -e recover_now=true tries now)"
            )
        else:
            cause_line = _what(cause, action, clear_trip)
    else:
        cause_line = _what(cause, action, clear_trip)

    summary = _summary(cause, silent, memory, exited, interrupted, promoted)
    report = [f"cause: {cause} - {summary}", f"decision: {action} - {cause_line}"]
    if promoted is not None:
        report.append(f"promoted release: {promoted['id']} (its last event: {_event(promoted.get('last_event'))})")
    report.extend(lines + memory + interrupted + exited)
    if cause in ("attempt-failed", "stopped", "memory") and records:
        report.append("what the last stop or undo kept of the ranks it removed:")
        report.extend(records)
    return {
        "cause": cause,
        "action": action,
        "summary": summary,
        "release": promoted["id"] if promoted is not None else None,
        "attempt": attempt if action == "boot" else None,
        "attempts_before": done,
        "max_attempts": settings.max_attempts,
        "next_at": next_at,
        "clear_trip": clear_trip,
        # the nodes where an interrupted boot's journal is open: recover.yml undoes it there first, whatever it decides
        "interrupted": sorted(interrupted_hosts),
        "event_detail": f"attempt {attempt} of {settings.max_attempts}: {cause}: {summary}"[:480],
        "msg": report,
    }


def _judge(
    silent: list[str],
    promoted: Mapping[str, Any] | None,
    memory: list[str],
    interrupted: list[str],
    exited: list[str],
    running: list[str],
    done: int,
    settings: Settings,
    window: bool = False,
) -> tuple[str, str]:
    if silent:
        return "not-answering", "refuse"
    if promoted is None:
        return "no-release", "refuse"
    if memory:
        return "memory", "boot" if settings.after_memory_trip else "refuse"
    if interrupted:
        return "interrupted-boot", "boot"
    if window:
        return "interrupted-window", "boot"
    if exited:
        return "rank-exit", "boot"
    if running:
        return "serving", "none"
    if done:
        return "attempt-failed", "boot"
    return "stopped", "none"


def _summary(
    cause: str,
    silent: list[str],
    memory: list[str],
    exited: list[str],
    interrupted: list[str],
    promoted: Mapping[str, Any] | None = None,
) -> str:
    if cause == "not-answering":
        return f"cannot tell: {', '.join(silent)} could not be asked"
    if cause == "no-release":
        return "no promoted release on the head to boot again (boot.yml records the first one)"
    if cause == "memory":
        return memory[0]
    if cause == "interrupted-boot":
        return interrupted[0]
    if cause == "interrupted-window":
        return (
            f"a window was opened ({_event((promoted or {}).get('last_event'))}) and never closed: its controller "
            "stopped before serving was restored"
        )
    if cause == "rank-exit":
        return exited[0]
    if cause == "attempt-failed":
        return "the last recovery attempt did not serve (its undo removed the ranks)"
    if cause == "serving":
        return "every rank container runs"
    return "no rank container on any node and no guard tripped: stopped on purpose (stop.yml, or a boot's undo)"


def _what(cause: str, action: str, clear_trip: bool) -> str:
    if action == "boot":
        return "boot the promoted release again" + (
            " (the trip cleared: -e recover_after_memory_trip=true)" if clear_trip else ""
        )
    if cause == "memory":
        return (
            "not booted again: a memory trip needs a changed profile (promote.yml) or an explicit override "
            "(-e recover_after_memory_trip=true, which clears the trip)"
        )
    if cause == "not-answering":
        return "not booted: every node must answer first"
    if cause == "no-release":
        return "not booted: nothing to boot again"
    if cause == "serving":
        return "nothing to do (if the API does not answer, stop.yml and then boot.yml)"
    return "nothing to do: recovery never starts a cluster stopped on purpose (boot.yml or rollback.yml does)"


def _event(event: Any) -> str:
    if not isinstance(event, Mapping):
        return "none"
    detail = f" ({event['detail']})" if event.get("detail") else ""
    return f"{event.get('event')} at {event.get('at')}{detail}"
