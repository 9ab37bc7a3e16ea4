# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster's status from one ``node_facts`` answer per node (playbooks/status.yml): the release that
serves, each rank's container, the API, each node's memory guard, the GPU clocks with the clock-latch verdict,
the weights' disk, and the last benchmark against the promoted release's run. Pure Python: no Ansible import.

:func:`status` returns one JSON-ready document; its ``degraded`` list names every reason an operator (or an AWX
schedule) must look: a node that did not answer, a rank not running, the API not answering (or its smoke
failing), a guard tripped, not running, or within ``floor_margin`` of its floor, a GPU clock latched.
:func:`lines` renders the document for the terminal, one screen.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping, Sequence
from typing import Any

FORMAT = "dgxspark.cluster/status/1"
GIB = 1024**3
# "close to its floor": MemAvailable now under the phase's floor times (1 + FLOOR_MARGIN)
FLOOR_MARGIN = 0.25
RESULTS = "results.json"


def _epoch(text: Any) -> float | None:
    """Docker's (nanosecond) or an ISO 8601 UTC time in epoch seconds; None for none or Docker's zero time."""
    if not isinstance(text, str) or not text or text.startswith("0001-"):
        return None
    whole, _dot, fraction = text.rstrip("Z").partition(".")
    try:
        moment = dt.datetime.fromisoformat(whole).replace(tzinfo=dt.UTC)
    except ValueError:
        return None
    digits = "".join(ch for ch in fraction if ch.isdigit())[:6]
    return moment.timestamp() + (int(digits) / 10 ** len(digits) if digits else 0.0)


def _gib(value: Any) -> str:
    return "-" if not isinstance(value, (int, float)) else f"{value / GIB:.2f} GiB"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(max(seconds, 0))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _node(answer: Any) -> tuple[dict[str, Any] | None, str | None]:
    """A registered node_facts answer: its ``node``, or why there is none (unreachable, failed)."""
    if not isinstance(answer, Mapping):
        return None, "no answer"
    if answer.get("unreachable"):
        return None, f"unreachable: {answer.get('msg') or 'no message'}"
    if answer.get("failed") or not isinstance(answer.get("node"), Mapping):
        return None, f"node_facts failed: {answer.get('msg') or 'no message'}"
    return dict(answer["node"]), None


# ----------------------------------------------------------------------------- sections
def _ranks(host: str, node: Mapping[str, Any], now: float) -> tuple[list[dict[str, Any]], list[str]]:
    ranks = node.get("ranks") or {}
    degraded: list[str] = []
    if ranks.get("error"):
        return [], [f"{host}: {ranks['error']}"]
    records = {r.get("name"): r for r in ranks.get("records") or []}
    found = []
    for container in ranks.get("containers") or []:
        started = _epoch(container.get("started_at"))
        running = bool(container.get("running"))
        record = records.get(container.get("name")) or {}
        entry = {
            "host": host,
            "name": container.get("name"),
            "rank": container.get("rank"),
            "running": running,
            "status": container.get("status"),
            "uptime_s": round(now - started, 1) if running and started is not None else None,
            "restarts": container.get("restart_count"),
            "exit_code": None if running else container.get("exit_code"),
            "oom_killed": bool(container.get("oom_killed")),
            "started_at": container.get("started_at"),
            "finished_at": None if running else container.get("finished_at"),
            "last_removed_exit_code": record.get("exit_code"),
            "log_tail": list(container.get("log_tail") or []),
        }
        found.append(entry)
        if not running:
            why = f"exit code {entry['exit_code']}" + (", OOM-killed" if entry["oom_killed"] else "")
            degraded.append(f"{host}: rank {entry['rank']} ({entry['name']}) is {entry['status']} ({why})")
    if not found:
        degraded.append(f"{host}: no rank container")
    return found, degraded


def _guard(host: str, node: Mapping[str, Any], margin: float) -> tuple[dict[str, Any], list[str]]:
    guard = node.get("memguard") or {}
    last = guard.get("last_sample") or {}
    lowest = guard.get("mem_available_min") or {}
    tripped = guard.get("tripped") or None
    now_bytes, floor = last.get("mem_available"), guard.get("floor_bytes")
    close = (
        isinstance(now_bytes, (int, float))
        and isinstance(floor, (int, float))
        and floor > 0
        and now_bytes < floor * (1 + margin)
    )
    entry = {
        "host": host,
        "installed": bool(guard.get("installed")),
        "running": guard.get("running"),
        "phase": guard.get("phase"),
        "trips": guard.get("trips"),
        "tripped": None
        if not tripped
        else {
            "time_utc": tripped.get("time_utc"),
            "reason": tripped.get("reason"),
            "from_peer": tripped.get("from_peer"),
        },
        "last_decision": guard.get("last_decision"),
        "mem_available_bytes": now_bytes,
        "floor_bytes": floor,
        "close_to_floor": bool(close),
        "mem_available_min_bytes": lowest.get("bytes"),
        "mem_available_min_since": lowest.get("since"),
    }
    degraded = []
    if not entry["installed"]:
        degraded.append(f"{host}: no memory guard (its state and trip files are absent)")
    elif tripped:
        peer = f" (a trip of {tripped['from_peer']})" if tripped.get("from_peer") else ""
        degraded.append(f"{host}: memory guard tripped at {tripped.get('time_utc')}{peer}: {tripped.get('reason')}")
    elif entry["running"] is False:
        degraded.append(f"{host}: memory guard not running (its state is {guard.get('state_age_s')} s old)")
    if close and not tripped:
        degraded.append(
            f"{host}: MemAvailable {_gib(now_bytes)} within {margin:.0%} of the {entry['phase']} floor {_gib(floor)}"
        )
    return entry, degraded


def _gpus(host: str, node: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    gpu = node.get("gpu") or {}
    latch = gpu.get("clock_latch") or {}
    judged = {g.get("index"): g for g in latch.get("gpus") or []}
    devices = []
    for device in gpu.get("devices") or []:
        verdict = judged.get(device.get("index")) or {}
        devices.append(
            {
                "index": device.get("index"),
                "name": device.get("name"),
                "sm_mhz": device.get("clocks_sm_mhz"),
                "max_sm_mhz": device.get("clocks_max_sm_mhz"),
                "graphics_mhz": device.get("clocks_graphics_mhz"),
                "temperature_c": device.get("temperature_c"),
                "utilization_pct": device.get("utilization_gpu_pct"),
                "power_w": device.get("power_draw_w"),
                "verdict": verdict.get("verdict"),
            }
        )
    entry = {
        "host": host,
        "present": bool(gpu.get("present")),
        "error": gpu.get("error"),
        "devices": devices,
        "clock_latch": latch.get("verdict"),
        "summary": latch.get("summary"),
    }
    degraded = [f"{host}: GPU clock latched: {latch.get('summary')}"] if latch.get("verdict") == "latched" else []
    return entry, degraded


def _disk(host: str, node: Mapping[str, Any]) -> dict[str, Any]:
    disk = node.get("disk") or {}
    return {
        "host": host,
        "path": disk.get("path"),
        "checked_path": disk.get("checked_path"),
        "available_bytes": disk.get("available_bytes"),
        "total_bytes": disk.get("total_bytes"),
    }


def _api(node: Mapping[str, Any] | None, endpoint: str | None) -> tuple[dict[str, Any], list[str]]:
    api = (node or {}).get("api") or {}
    entry = {
        "endpoint": endpoint,
        "checked_from_head": api.get("url"),
        "answered": bool(api.get("answered")),
        "models": list(api.get("models") or []),
        "seconds": api.get("seconds"),
        "error": api.get("error") if node is not None else "the head did not answer",
        "smoke": api.get("smoke"),
    }
    degraded = []
    if not entry["answered"]:
        degraded.append(f"API down: {entry['error'] or 'no answer'} ({entry['checked_from_head'] or endpoint})")
    smoke = entry["smoke"]
    if smoke is not None and not smoke.get("ok"):
        degraded.append(f"API smoke failed: {smoke.get('error') or 'no token'}")
    return entry, degraded


def _serving(releases: Mapping[str, Any], ranks: Sequence[Mapping[str, Any]], specs: Mapping[str, Any]) -> dict:
    """The release whose every rank's spec is what runs (newest first, not retired), else the promoted one."""
    listed = [r for r in releases.get("releases") or [] if isinstance(r, Mapping)]
    running = {host: sha for host, sha in specs.items() if sha}
    match = None
    if running:
        for release in sorted(listed, key=lambda r: str(r.get("created")), reverse=True):
            if release.get("state") != "retired" and dict(release.get("spec_sha256") or {}) == running:
                match = release
                break
    promoted = next((r for r in listed if r.get("id") == releases.get("promoted")), None)
    chosen = match or promoted
    if chosen is None:
        return {"id": None, "serves": False, "note": "no release is kept on the head (releases.yml)"}
    return {
        "id": chosen.get("id"),
        "state": chosen.get("state"),
        "created": chosen.get("created"),
        "by": chosen.get("by"),
        "profile": chosen.get("profile_path"),
        "profile_sha256": chosen.get("profile_sha256"),
        "shape": chosen.get("shape"),
        "image": chosen.get("image"),
        "serves": match is not None,
        "promoted": releases.get("promoted"),
        "note": None if match else "what runs is no release's specs: the promoted release is shown",
        "bench": chosen.get("bench"),
        "promoted_bench": (promoted or {}).get("bench"),
    }


# ----------------------------------------------------------------------------- benchmark runs
def newest_run(bench_dir: str | None) -> str | None:
    """The newest run's results.json under ``bench_dir`` (run folders start with their time), or None."""
    if not bench_dir:
        return None
    try:
        names = sorted(os.listdir(bench_dir))
    except OSError:
        return None
    runs = [os.path.join(bench_dir, n, RESULTS) for n in names if os.path.isfile(os.path.join(bench_dir, n, RESULTS))]
    return runs[-1] if runs else None


def headline(summary: Mapping[str, Any], path: str) -> dict[str, Any]:
    """A bench summary's headline: its run, gate, Max C, and per level TTFT p90, TPOT mean and output tok/s."""
    identity = summary.get("identity") or {}
    levels = [
        {
            "concurrency": level.get("concurrency"),
            "ttft_p90_ms": ((level.get("stats") or {}).get("ttft_ms") or {}).get("p90"),
            "tpot_mean_ms": ((level.get("stats") or {}).get("tpot_ms") or {}).get("mean"),
            "output_tps": level.get("output_tps"),
            "errors": level.get("errors"),
        }
        for level in summary.get("levels") or []
    ]
    capacity = summary.get("capacity") or {}
    return {
        "results": path,
        "run": os.path.basename(os.path.dirname(path)),
        "started_at": identity.get("started_at"),
        "profile_hash": identity.get("profile_hash"),
        "gate_passed": (summary.get("gate") or {}).get("passed"),
        "max_c": capacity.get("max_c"),
        "max_c_may_be_higher": capacity.get("may_be_higher"),
        "levels": levels,
    }


def bench_section(bench_dir: str | None, promoted_results: str | None, summarize: Any, load: Any) -> dict[str, Any]:
    """The last run under ``bench_dir`` and the promoted release's run (its kept ``results.json``), each as its
    :func:`headline`; ``summarize``/``load`` are the bench's own (plugin_utils.bench.bench)."""

    def read(path: str | None) -> dict[str, Any] | None:
        if not path:
            return None
        if not os.path.isfile(path):
            return {"results": path, "error": "not on this controller"}
        try:
            return headline(summarize(load(path)), path)
        except (OSError, ValueError) as error:
            return {"results": path, "error": str(error)}

    last_path = newest_run(bench_dir)
    last = read(last_path)
    same = bool(last_path and promoted_results and os.path.realpath(last_path) == os.path.realpath(promoted_results))
    promoted = last if same else read(promoted_results)
    delta = None
    if last and promoted and not same and "error" not in last and "error" not in promoted:
        delta = {"max_c": [promoted.get("max_c"), last.get("max_c")]}
    return {"dir": bench_dir, "last": last, "promoted": promoted, "last_is_promoted": same, "max_c_change": delta}


# ----------------------------------------------------------------------------- the document
def status(
    answers: Mapping[str, Any],
    hosts: Sequence[str],
    head: str,
    now: float,
    endpoint: str | None = None,
    bench: Mapping[str, Any] | None = None,
    floor_margin: float = FLOOR_MARGIN,
) -> dict[str, Any]:
    """The status document from every host's registered node_facts answer (``answers``, by inventory name; the
    head's with its ``releases`` and ``api`` sections), ``now`` in epoch seconds, ``endpoint`` the API's address
    for clients, ``bench`` :func:`bench_section`'s result (or None)."""
    if floor_margin < 0:
        raise ValueError(f"floor_margin must be 0 or more, found {floor_margin}")
    degraded: list[str] = []
    ranks: list[dict[str, Any]] = []
    guards: list[dict[str, Any]] = []
    gpus: list[dict[str, Any]] = []
    disks: list[dict[str, Any]] = []
    nodes: dict[str, Any] = {}
    specs: dict[str, Any] = {}
    for host in hosts:
        node, why = _node(answers.get(host))
        nodes[host] = {"answered": node is not None, "error": why}
        if node is None:
            degraded.append(f"{host}: did not answer ({why})")
            continue
        found, said = _ranks(host, node, now)
        ranks += found
        degraded += said
        specs[host] = next((c.get("spec_sha256") for c in (node.get("ranks") or {}).get("containers") or []), None)
        guard, said = _guard(host, node, floor_margin)
        guards.append(guard)
        degraded += said
        gpu, said = _gpus(host, node)
        gpus.append(gpu)
        degraded += said
        disks.append(_disk(host, node))
    head_node, _why = _node(answers.get(head))
    api, said = _api(head_node, endpoint)
    degraded += said
    release = _serving((head_node or {}).get("releases") or {}, ranks, specs)
    return {
        "format": FORMAT,
        "at": dt.datetime.fromtimestamp(now, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cluster": {"head": head, "hosts": list(hosts), "nodes": nodes},
        "release": {k: v for k, v in release.items() if k not in ("bench", "promoted_bench")},
        "ranks": ranks,
        "api": api,
        "guards": guards,
        "gpus": gpus,
        "disks": disks,
        "bench": dict(bench) if bench is not None else None,
        "degraded": degraded,
        "ok": not degraded,
    }


def promoted_results(answers: Mapping[str, Any], head: str) -> str | None:
    """Where the promoted release keeps its benchmark run's results.json (on the controller that ran it)."""
    node, _why = _node(answers.get(head))
    releases = (node or {}).get("releases") or {}
    promoted = next((r for r in releases.get("releases") or [] if r.get("id") == releases.get("promoted")), None)
    return ((promoted or {}).get("bench") or {}).get("results")


# ----------------------------------------------------------------------------- the screen
def _bench_line(name: str, run: Mapping[str, Any] | None) -> list[str]:
    if run is None:
        return [f"  {name}: none"]
    if run.get("error"):
        return [f"  {name}: {run['results']}: {run['error']}"]
    head = (
        f"  {name}: {run['run']} ({run.get('started_at')}), gate {'passed' if run.get('gate_passed') else 'FAILED'}, "
        f"Max C {run.get('max_c') if run.get('max_c') is not None else 'none'}"
        + (" (or more)" if run.get("max_c_may_be_higher") else "")
    )
    levels = [
        f"    C={lv['concurrency']}: TTFT p90 {_num(lv['ttft_p90_ms'])} ms, TPOT {_num(lv['tpot_mean_ms'])} ms, "
        f"{_num(lv['output_tps'])} tok/s" + (f", {lv['errors']} errors" if lv.get("errors") else "")
        for lv in run.get("levels") or []
    ]
    return [head, *levels]


def _num(value: Any) -> str:
    return "-" if not isinstance(value, (int, float)) else f"{value:.1f}"


def lines(document: Mapping[str, Any]) -> list[str]:
    """The status for the terminal: the verdict first, then each section."""
    cluster, release, api = document["cluster"], document["release"], document["api"]
    out = [
        ("status: OK" if document["ok"] else f"status: DEGRADED ({len(document['degraded'])})")
        + f" - {len(cluster['hosts'])} nodes, head {cluster['head']}, at {document['at']}"
    ]
    out += [f"  ! {reason}" for reason in document["degraded"]]
    if release.get("id"):
        out.append(
            f"release: {release['id']} ({release.get('state')}), {release.get('created')} by {release.get('by')}; "
            f"profile {release.get('profile')} ({str(release.get('profile_sha256'))[:12]}), "
            f"shape {release.get('shape')}, "
            f"image {release.get('image')}" + (f" - {release['note']}" if release.get("note") else "")
        )
    else:
        out.append(f"release: none - {release.get('note')}")
    out.append("ranks:")
    for rank in document["ranks"]:
        state = (
            f"{rank['status']} {_duration(rank['uptime_s'])}"
            if rank["running"]
            else (
                f"{rank['status']} (exit {rank['exit_code']}{', OOM-killed' if rank['oom_killed'] else ''}, "
                f"finished {rank['finished_at']})"
            )
        )
        extra = (
            f", last removed exit {rank['last_removed_exit_code']}"
            if rank["last_removed_exit_code"] is not None
            else ""
        )
        out.append(f"  {rank['host']}: rank {rank['rank']} {rank['name']} {state}, restarts {rank['restarts']}{extra}")
        out += [f"    | {line}" for line in rank["log_tail"]]
    smoke = api.get("smoke")
    out.append(
        f"API: {api.get('endpoint')} - "
        + (
            f"answers, models {', '.join(api['models'])} ({api['seconds']} s)"
            if api["answered"]
            else f"DOWN: {api['error']}"
        )
        + (
            ""
            if smoke is None
            else f"; smoke {'ok' if smoke.get('ok') else 'FAILED'} (TTFT {smoke.get('ttft')} s)"
            + (f": {smoke['error']}" if smoke.get("error") else "")
        )
    )
    out.append("memory guards:")
    for guard in document["guards"]:
        decision = guard.get("last_decision") or {}
        trip = guard.get("tripped")
        out.append(
            f"  {guard['host']}: {guard.get('phase') or 'no state'}"
            + (f", TRIPPED at {trip['time_utc']}: {trip['reason']}" if trip else ", not tripped")
            + f"; MemAvailable {_gib(guard['mem_available_bytes'])} (floor {_gib(guard['floor_bytes'])}), "
            f"lowest since the boot {_gib(guard['mem_available_min_bytes'])}; last decision "
            + (f"{decision.get('decision')}: {decision.get('reason')}" if decision else "none")
        )
    out.append("GPUs:")
    for gpu in document["gpus"]:
        if not gpu["present"]:
            out.append(f"  {gpu['host']}: no GPU ({gpu.get('error')})")
            continue
        for device in gpu["devices"]:
            out.append(
                f"  {gpu['host']} GPU {device['index']} {device['name']}: "
                f"SM {device['sm_mhz']}/{device['max_sm_mhz']} MHz, "
                f"{device['temperature_c']} C, {device['utilization_pct']} % busy; clock latch: {device['verdict']}"
            )
    out.append("disk of the weights:")
    for disk in document["disks"]:
        if not disk.get("path"):
            out.append(f"  {disk['host']}: none named (the profile has no host.weights_path)")
            continue
        out.append(
            f"  {disk['host']}: {disk['path']}: {_gib(disk.get('available_bytes'))} free "
            f"of {_gib(disk.get('total_bytes'))}"
        )
    bench = document.get("bench")
    out.append("benchmark:" + ("" if bench else " not read"))
    if bench:
        out += _bench_line("last run", bench.get("last"))
        if bench.get("last_is_promoted"):
            out.append("  the promoted release run is the last run")
        else:
            out += _bench_line("promoted release run", bench.get("promoted"))
        change = bench.get("max_c_change")
        if change:
            out.append(f"  Max C: {change['max_c'][0]} (promoted) -> {change['max_c'][1]} (last)")
    return out
