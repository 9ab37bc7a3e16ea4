# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The weights sync's transfer to one target, driven from the controller (issue 30).

Two processes, each an ``ssh`` (with the inventory's settings, as ``images.yml``'s stream) running ``python3`` on a
node with the text of ``module_utils/_weights_transfer.py`` (and of ``_weights_manifest.py``, which it imports) on
its input - nothing is installed on a node, and no node needs a key to another:

1. on the source, the read-only file server, bound to the source's address on the target's network (the fabric
   where the plan pairs it), serving only the files this target gets, with a one-time token made here; it lives as
   long as its SSH process's input stays open, which this end closes when the target is done;
2. on the target, the puller, which fetches the files from that server over that network (the bytes never pass
   through the controller), resumes partial copies, checks each file's SHA-256 on arrival and refreshes the node's
   manifest cache.

The puller's events come back as JSON lines; a progress line (bytes, share, rate, ETA, the file) goes to ``report``
every ``every`` seconds. ``timeout`` bounds the whole and ``idle_timeout`` the time without a byte; past either both
ends are stopped, and the failure names the node and the file. No Ansible imports.
"""

from __future__ import annotations

import json
import queue
import secrets
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.release.images import _stop, human

MODULE_UTILS = Path(__file__).resolve().parents[2] / "module_utils"
PACKAGE = "ansible_collections.dgxspark.cluster.plugins.module_utils"
NODE_CODE = ("_weights_manifest", "_weights_transfer")
"""The module_utils a node runs, in import order (the last has ``main``)."""

BOOTSTRAP = """\
import json, sys, types
given = json.loads(sys.stdin.readline())
for full in given["order"]:
    parts = full.split(".")
    for i in range(1, len(parts)):
        parent = ".".join(parts[:i])
        if parent not in sys.modules:
            sys.modules[parent] = types.ModuleType(parent)
            sys.modules[parent].__path__ = []
    module = types.ModuleType(full)
    sys.modules[full] = module
    exec(compile(given["sources"][full], full, "exec"), module.__dict__)
def write(text):
    sys.stdout.write(text)
    sys.stdout.flush()
sys.exit(sys.modules[given["order"][-1]].main(sys.argv[1], sys.stdin, write))
"""


def payload() -> bytes:
    """The first input line of either end: the node code's text, in import order."""
    order = [f"{PACKAGE}.{name}" for name in NODE_CODE]
    sources = {f"{PACKAGE}.{name}": (MODULE_UTILS / f"{name}.py").read_text(encoding="utf-8") for name in NODE_CODE}
    return (json.dumps({"order": order, "sources": sources}) + "\n").encode("utf-8")


def node_command(kind: str, python: str = "python3") -> str:
    """The shell command that runs one end (``serve`` or ``pull``) on a node."""
    return f"exec {shlex.quote(python)} -c {shlex.quote(BOOTSTRAP)} {kind}"


def token() -> str:
    return secrets.token_urlsafe(32)


class _Lines:
    """A pipe's lines, read by a thread into a queue (None when it closes); its last lines kept."""

    def __init__(self, pipe: Any) -> None:
        self.queue: queue.Queue[str | None] = queue.Queue()
        self.tail: list[str] = []
        self.thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self.thread.start()

    def _read(self, pipe: Any) -> None:
        with pipe:
            for raw in iter(pipe.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\n")
                self.tail = [*self.tail[-19:], line]
                self.queue.put(line)
        self.queue.put(None)

    def text(self, wait: float = 2.0) -> str:
        self.thread.join(wait)
        return " / ".join(line for line in self.tail[-5:] if line.strip()) or "nothing said"


def _start(argv: Sequence[str]) -> subprocess.Popen:
    return subprocess.Popen(
        list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )


def _event(line: str | None) -> dict[str, Any] | None:
    if line is None:
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return {"event": "noise", "text": line}
    return event if isinstance(event, dict) else {"event": "noise", "text": line}


@dataclass
class Outcome:
    """What one target's transfer did."""

    ok: bool = False
    msg: str = ""
    moved: int = 0
    seconds: float = 0.0
    arrived: list[str] = field(default_factory=list)
    resumed: dict[str, int] = field(default_factory=dict)
    progress: list[str] = field(default_factory=list)
    cache: str = ""
    staged: list[str] = field(default_factory=list)


def staging_reason(ranks: Mapping[str, Any] | None) -> str:
    """Why the files must be staged rather than put in place (empty: they may go in place): a rank container running
    on the node (node_facts' ``ranks`` section), or no way to tell (its engine could not be asked)."""
    if not isinstance(ranks, Mapping):
        return ""
    running = sorted(
        str(c.get("name") or c.get("id") or "?")
        for c in ranks.get("containers") or []
        if isinstance(c, Mapping) and c.get("running")
    )
    if running:
        return f"a rank is running here ({', '.join(running)}): its weights are never changed under it"
    if ranks.get("error"):
        return f"whether a rank is running here cannot be told ({ranks['error']})"
    return ""


def progress_line(label: str, done: int, total: int, moved: int, seconds: float, name: str) -> str:
    """``label``: DONE of TOTAL (share) in S s, RATE/s, ETA S s (the file): ``moved`` is what this run moved."""
    rate = moved / seconds if seconds > 0 else 0.0
    share = f" ({100 * done / total:.0f} %)" if total else ""
    left = max(0, total - done)
    eta = f"ETA {left / rate:.0f} s" if rate > 0 else "ETA unknown"
    now = f", {name}" if name else ""
    return f"{label}: {human(done)} of {human(total)}{share} in {seconds:.0f} s, {human(rate)}/s, {eta}{now}"


def sync(
    source_argv: Sequence[str],
    target_argv: Sequence[str],
    serve_config: Mapping[str, Any],
    pull_config: Mapping[str, Any],
    target: str,
    source: str,
    total: int,
    timeout: float = 86400,
    idle_timeout: float = 300,
    every: float = 10.0,
    report: Callable[[str], None] | None = None,
) -> Outcome:
    """Send ``pull_config["files"]`` from ``source`` to ``target``: start the server with ``source_argv`` (it gets
    ``serve_config``), then the puller with ``target_argv`` (``pull_config`` and the server's port)."""
    out = Outcome()
    label = f"{target}: {source} -> {target}"
    start = time.monotonic()
    code = payload()
    secret = str(serve_config.get("token") or "")
    try:
        server = _start(source_argv)
    except OSError as error:
        out.msg = f"{target}: the file server on {source} could not be started: {error}"
        return out
    server_lines, server_err = _Lines(server.stdout), _Lines(server.stderr)
    try:
        server.stdin.write(code + (json.dumps({**serve_config, "lifetime": timeout}) + "\n").encode())  # type: ignore[union-attr]
        server.stdin.flush()  # type: ignore[union-attr]
    except OSError:
        pass  # it ended already: what it said is read below
    try:
        said = _event(server_lines.queue.get(timeout=max(30.0, min(idle_timeout, 120.0))))
    except queue.Empty:
        said = {"error": "no answer within the start-up time"}
    if not said or "port" not in said:
        _stop(server)
        why = (said or {}).get("error") or (said or {}).get("text") or server_err.text()
        out.msg = f"{target}: the file server on {source} did not start: {why}; nothing was moved"
        return out
    config = {**pull_config, "port": said["port"], "token": secret}
    try:
        puller = _start(target_argv)
    except OSError as error:
        _stop(server)
        out.msg = f"{target}: the puller could not be started: {error}"
        return out
    events, puller_err = _Lines(puller.stdout), _Lines(puller.stderr)
    try:
        puller.stdin.write(code + (json.dumps(config) + "\n").encode())  # type: ignore[union-attr]
        puller.stdin.flush()  # type: ignore[union-attr]  # kept open: the puller stops when it closes
    except OSError:
        pass
    try:
        state = _follow(events, out, label, start, total, timeout, idle_timeout, every, report)
    except BaseException:
        _stop(puller)  # interrupted (Ctrl-C): neither end outlives the controller's task
        _stop(server)
        raise
    current, moved, skipped, final, stopped = state
    if stopped:
        _stop(puller)
    for end in (puller, server):
        try:
            end.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
    if report and every > 0 and final and final.get("event") == "done":
        line = progress_line(f"{label} done", skipped + moved, total, moved, time.monotonic() - start, "")
        out.progress.append(line)
        report(line)
    try:
        puller.wait(30)
    except subprocess.TimeoutExpired:
        _stop(puller)
    try:
        server.wait(10)
    except subprocess.TimeoutExpired:
        _stop(server)
    out.moved, out.seconds = moved, time.monotonic() - start
    if final:
        out.arrived = [str(name) for name in final.get("arrived") or []]
        out.staged = [str(name) for name in final.get("staged") or []]
        out.cache = str(final.get("cache") or "")
    where = f" ({current})" if current else ""
    if stopped:
        out.msg = (
            f"{target}: {stopped} while receiving {current or 'the first file'} from {source}; "
            f"{len(out.arrived)} file(s) arrived and checked, a partial copy{where} is kept: run again to resume"
        )
    elif final and final.get("event") == "done" and puller.returncode == 0 and out.staged:
        out.ok = True
        out.msg = (
            f"{target}: {len(out.staged)} file(s) from {source}, {human(skipped + moved)}, each SHA-256 checked, "
            f"STAGED under {pull_config.get('root')}/.dgxspark-partial/ and NOT put in place: "
            f"{pull_config.get('stage_reason') or 'asked to stage'}. Run weights.yml again once the ranks are stopped "
            "(stop.yml; before the next boot.yml or rollback.yml): it checks the staged copies, moves no byte of them "
            "again and puts them in place"
        )
    elif final and final.get("event") == "done" and puller.returncode == 0:
        out.ok = True
        out.msg = (
            f"{target}: {len(out.arrived)} file(s) from {source}, {human(skipped + moved)} "
            f"({human(moved)} moved{', resumed' if skipped else ''}) in {out.seconds:.1f} s, each SHA-256 checked"
        )
    elif final:
        out.msg = f"{target}: {final.get('msg')} (from {source}; {len(out.arrived)} file(s) arrived and checked)"
    else:
        out.msg = (
            f"{target}: the puller ended (exit {puller.returncode}) while receiving {current or 'the first file'} "
            f"from {source}: {puller_err.text()}"
        )
    return out


def _follow(
    events: _Lines,
    out: Outcome,
    label: str,
    start: float,
    total: int,
    timeout: float,
    idle_timeout: float,
    every: float,
    report: Callable[[str], None] | None,
) -> tuple[str, int, int, dict[str, Any] | None, str]:
    """Read the puller's events until it ends or a time limit passes: (its file, moved, skipped, its last event,
    why it was stopped)."""
    current, moved, skipped, last = "", 0, 0, time.monotonic()
    final: dict[str, Any] | None = None
    next_line = start + every
    stopped = ""
    while True:
        try:
            event = _event(events.queue.get(timeout=0.2))
            if event is None:
                break
        except queue.Empty:
            event = {}
        now = time.monotonic()
        kind = event.get("event")
        if kind and kind != "bytes":
            last = now  # a file checked or begun is progress too
        if kind == "file":
            current = str(event.get("name") or "")
        elif kind == "bytes":
            if int(event.get("moved") or 0) > moved:
                last = now
            moved = max(moved, int(event.get("moved") or 0))
        elif kind == "resumed":
            skipped += int(event.get("offset") or 0)
            out.resumed[str(event.get("name"))] = int(event.get("offset") or 0)
            if report:
                report(f"{label}: {event.get('name')}: resumed at {int(event.get('offset') or 0):,} bytes (checked)")
        elif kind == "restarted" and report:
            report(f"{label}: {event.get('name')}: a partial copy of another content, started again")
        elif kind in ("done", "failed"):
            final = event
        if now - start > timeout:
            stopped = f"timed out after {timeout:.0f} s"
        elif now - last > idle_timeout:
            stopped = f"no byte came for {idle_timeout:.0f} s"
        if stopped:
            break
        if every > 0 and now >= next_line and kind != "done":
            line = progress_line(label, skipped + moved, total, moved, now - start, current)
            out.progress.append(line)
            if report:
                report(line)
            next_line = now + every
    return current, moved, skipped, final, stopped
