# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Putting a release's image on the nodes that lack it (``playbooks/images.yml``): the plan and the stream.

The plan is worked out on the controller, before anything moves, from each node's ``node_facts`` (its ``docker``
section; the head's ``releases`` section too): which image ID the release recorded for every node, which nodes
lack it, what the head saves (the image's tags, so that a rank naming it by tag finds it; its ID when it has none),
and why nothing can move (the head itself lacks it, a node's engine cannot be asked, no such release). Plain data
in and out, no Ansible imports.

The stream runs two processes the caller builds (``ssh`` to the head running ``docker save``, ``ssh`` to the node
running ``docker load``) and pumps the one's output into the other's input a chunk at a time, counting bytes: the
image is never held in the controller's memory nor written to its disk. Progress lines (bytes moved, rate) come
every few seconds; an overall and an idle timeout stop both processes. ``ssh_command`` builds the ``ssh`` argument
vector from a host's resolved connection options, the way Ansible's ``ssh`` connection plugin names them.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.images import (
    familiar,
    find_image,
    parse_reference,
)

CHUNK = 1 << 20  # bytes read from the source and written to the sink at a time: all the controller ever holds
NO_TAG = "<none>:<none>"
DIGEST_WARNING = (
    "the release names its image by repository digest ({ref}); docker save and docker load carry no repository "
    "digest, so a node that gets it from the head has the image ID but not the digest, and the boot's image-present "
    "check still FAILs there: name the image by its ID in the profile, or pull it (-e images_pull=true)"
)


class TransferError(ValueError):
    """Connection settings that a stream cannot use; the message says which and why."""


# ------------------------------------------------------------------------------------------------ the plan
def _size(image: Mapping[str, Any] | None) -> int | None:
    value = (image or {}).get("size")
    return int(value) if isinstance(value, (int, float)) else None


def human(count: float | None) -> str:
    """Bytes as an operator reads them: ``512.0 MiB``."""
    if count is None:
        return "size unknown"
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # pragma: no cover


def _docker(node: Any) -> tuple[list[Mapping[str, Any]] | None, str]:
    """A node's images, or None and why they cannot be known."""
    if not isinstance(node, Mapping):
        return None, "its facts were not read (not in this run? --limit must include it)"
    docker = node.get("docker")
    if not isinstance(docker, Mapping):
        return None, "node_facts returned no docker section"
    if docker.get("error") or not docker.get("present", True):
        return None, f"its Docker engine could not be asked: {docker.get('error') or 'not present'}"
    return [i for i in docker.get("images") or [] if isinstance(i, Mapping)], ""


def _chosen_release(node: Mapping[str, Any], wanted: str) -> tuple[Mapping[str, Any] | None, str]:
    known = node.get("releases")
    if not isinstance(known, Mapping):
        return None, "the head's releases were not read (node_facts' releases section)"
    summaries = {str(r.get("id")): r for r in known.get("releases") or [] if isinstance(r, Mapping)}
    listing = ", ".join(summaries) or "none"
    if wanted:
        if wanted not in summaries:
            return None, f"no release {wanted} on the head (known: {listing})"
        return summaries[wanted], ""
    promoted = summaries.get(str(known.get("promoted") or ""))
    if promoted is None:
        return None, (
            f"no promoted release on the head (known: {listing}): name one with -e dgxspark_release=ID, or put the "
            "current profile's image with -e images_profile=true"
        )
    return promoted, ""


def plan(
    facts: Mapping[str, Any],
    head: str,
    hosts: Sequence[str],
    release: str = "",
    profile_images: Mapping[str, str] | None = None,
    pull: bool = False,
) -> dict[str, Any]:
    """Which of ``hosts`` lack which image ID, and how each gets it.

    ``facts``: host to its node_facts (``docker``; the head's ``releases`` too unless ``profile_images``).
    ``release``: a release's id, else the promoted release; ``profile_images``: host to the image reference its rank
    names (the current profile's, instead of a release's: the ID is the one the head's image of that name has).
    ``pull``: the nodes that lack it pull it by name from its registry instead of the head streaming it.

    The answer: ``refusal`` (empty, or why nothing moves, before anything does), ``moves`` (host, image ID, the
    names the head saves or the name pulled, the size), ``present`` and ``lacking`` hosts, ``warnings``, ``lines``
    (what the run would do, a line a node) and ``summary``."""
    out: dict[str, Any] = {
        "source": head,
        "mode": "pull" if pull else "stream",
        "release": None,
        "image": None,
        "moves": [],
        "present": [],
        "lacking": [],
        "warnings": [],
        "lines": [],
        "summary": "",
        "refusal": "",
    }

    def refuse(why: str) -> dict[str, Any]:
        out["refusal"] = f"images.yml: nothing was moved: {why}"
        return out

    hosts = list(dict.fromkeys([head, *hosts]))
    head_images, why = _docker(facts.get(head))
    if head_images is None:
        return refuse(f"the head {head}: {why}")
    wanted: dict[str, str] = {}
    if profile_images:
        reference = str(profile_images.get(head) or next(iter(profile_images.values())))
        out["image"] = reference
        for host in hosts:
            ref = str(profile_images.get(host) or reference)
            found = find_image(head_images, ref)
            if found is None:
                return refuse(
                    f"the head {head} lacks the profile's image {ref} itself, so there is nothing to stream from: "
                    "put it on the head first (docker pull or docker load there), or pull it on every node that "
                    "lacks it (-e images_pull=true)"
                    if not pull
                    else f"the head {head} has no image {ref}, so its ID is not known: pull it on the head first"
                )
            wanted[host] = str(found.get("id"))
    else:
        chosen, why = _chosen_release(facts.get(head) or {}, release)
        if chosen is None:
            return refuse(why)
        out["release"], out["image"] = chosen["id"], chosen.get("image")
        images = {str(h): str(i) for h, i in (chosen.get("images") or {}).items() if i}
        fallback = images.get(head) or next(iter(images.values()), None)
        if fallback is None:
            return refuse(f"release {chosen['id']} recorded no image ID for any node")
        for host in hosts:
            if host not in images:
                out["warnings"].append(
                    f"{host}: release {chosen['id']} recorded no image for it; it gets the head's, {fallback}"
                )
            wanted[host] = images.get(host, fallback)
    reference = str(out["image"] or "")
    ref = parse_reference(reference) if reference else None
    unknown = []
    for host in hosts:
        images, why = _docker(facts.get(host))
        if images is None:
            unknown.append(f"{host}: {why}")
            continue
        if wanted[host] in {str(i.get("id")) for i in images}:
            out["present"].append(host)
        else:
            out["lacking"].append(host)
    if unknown:
        return refuse("cannot tell which nodes lack the image: " + "; ".join(unknown))
    what = f"release {out['release']}'s image" if out["release"] else "the profile's image"
    if pull:
        if ref is None or ref.by_id:
            return refuse(
                f"{what} is named by its ID alone ({reference or 'no name recorded'}): a registry cannot be asked "
                "for an ID; stream it from the head instead (leave images_pull false)"
            )
        for host in out["lacking"]:
            out["moves"].append({"host": host, "image_id": wanted[host], "pull": reference, "size": None})
    else:
        by_id = {str(i.get("id")): i for i in head_images}
        for host in out["lacking"]:
            if wanted[host] not in by_id:
                return refuse(
                    f"the head {head} lacks {what} {wanted[host]} ({reference}) itself, so there is nothing to stream "
                    f"from (and {host} needs it): put it back on the head first, or pull it on every node that lacks "
                    "it (-e images_pull=true)"
                )
        for image_id in sorted({wanted[h] for h in out["lacking"]}):
            image = by_id[image_id]
            tags = [str(t) for t in image.get("tags") or [] if t and t != NO_TAG]
            if ref is not None and ref.repository and not ref.digest and ref.wanted not in map(familiar, tags):
                out["warnings"].append(
                    f"{reference} no longer names image {image_id} on the head {head} (its tags: "
                    f"{', '.join(tags) or 'none'}): the nodes get the image by ID and with those tags"
                )
            for host in out["lacking"]:
                if wanted[host] == image_id:
                    out["moves"].append(
                        {"host": host, "image_id": image_id, "names": tags or [image_id], "size": _size(image)}
                    )
        if ref is not None and ref.digest and not ref.by_id and out["moves"]:
            out["warnings"].append(DIGEST_WARNING.format(ref=reference))
    moving = {m["host"]: m for m in out["moves"]}
    for host in hosts:
        short = wanted[host][:19]
        if host in moving and pull:
            out["lines"].append(f"{host}: lacks {short}: pulls {reference} from its registry, then checks the ID")
        elif host in moving:
            names = ", ".join(moving[host]["names"])
            size = human(moving[host]["size"])
            out["lines"].append(f"{host}: lacks {short}: streams {names} from {head} ({size}), then checks the ID")
        else:
            out["lines"].append(f"{host}: has {short}")
    label = f"{what} {reference}".strip()
    if out["moves"]:
        out["summary"] = f"{label}: {len(out['moves'])} of {len(hosts)} node(s) lack it ({', '.join(moving)})"
    else:
        out["summary"] = f"{label}: every node has it ({len(hosts)}), nothing moves"
    return out


# ------------------------------------------------------------------------------------------------ the commands
def remote_script(script: str, become: Mapping[str, Any] | None = None) -> str:
    """One shell command line for the remote end: ``sh -c SCRIPT``, under ``sudo -n`` when ``become`` asks."""
    command = f"sh -c {shlex.quote(script)}"
    if become and become.get("enabled"):
        user = str(become.get("user") or "root")
        command = f"sudo -n -H -u {shlex.quote(user)} -- {command}"
    return command


def save_script(names: Sequence[str], docker: str = "docker") -> str:
    return f"exec {shlex.quote(docker)} save {' '.join(shlex.quote(n) for n in names)}"


def load_script(docker: str = "docker") -> str:
    return f"exec {shlex.quote(docker)} load"


def pull_script(name: str, docker: str = "docker") -> str:
    return f"exec {shlex.quote(docker)} pull --quiet {shlex.quote(name)}"


def verify_script(names: Sequence[str], docker: str = "docker") -> str:
    """Prints ``NAME ID`` (or ``NAME -``) for every name: what each resolves to on the node."""
    words = " ".join(shlex.quote(n) for n in names)
    return (
        f"for n in {words}; do i=$({shlex.quote(docker)} image inspect --format '{{{{.Id}}}}' \"$n\" 2>/dev/null) "
        '|| i=-; printf \'%s %s\\n\' "$n" "$i"; done'
    )


def verify(output: str, names: Sequence[str], image_id: str) -> list[str]:
    """The names that do not resolve to ``image_id`` on the node, each as ``NAME is ID`` (``is missing``)."""
    found: dict[str, str] = {}
    for line in output.splitlines():
        name, _sep, ident = line.strip().rpartition(" ")
        if name:
            found[name] = ident
    wrong = []
    for name in names:
        ident = found.get(name, "-")
        if ident != image_id:
            wrong.append(f"{name} is {'missing' if ident in ('-', '') else ident}")
    return wrong


def ssh_command(options: Mapping[str, Any], remote: str) -> list[str]:
    """The ``ssh`` argument vector that runs ``remote`` on a host, from its connection options as Ansible's ``ssh``
    connection plugin resolves them (``host``, ``port``, ``remote_user``, ``private_key_file``, ``ssh_args``,
    ``ssh_common_args``, ``ssh_extra_args``, ``ssh_executable``, ``host_key_checking``, ``timeout``); ``connection``
    ``local`` runs it here. A password or a key given as text cannot be used: the stream's input is the image."""
    connection = str(options.get("connection") or "ssh").rsplit(".", 1)[-1]
    if connection == "local":
        return ["sh", "-c", remote]
    if connection not in ("ssh", "smart"):
        raise TransferError(f"connection {options.get('connection')} is not ssh (or local): cannot stream over it")
    if options.get("password"):
        raise TransferError("an SSH password is set (ansible_password): streams use key authentication only")
    if options.get("private_key"):
        raise TransferError("the SSH key is given as text (ansible_private_key): give it as a file to stream")
    argv = [str(options.get("ssh_executable") or "ssh")]
    for name in ("ssh_args", "ssh_common_args", "ssh_extra_args"):
        argv += shlex.split(str(options.get(name) or ""))
    if options.get("host_key_checking") is False:
        argv += ["-o", "StrictHostKeyChecking=no"]
    argv += ["-o", "BatchMode=yes"]
    if options.get("timeout"):
        argv += ["-o", f"ConnectTimeout={int(options['timeout'])}"]
    if options.get("port"):
        argv += ["-p", str(options["port"])]
    if options.get("private_key_file"):
        argv += ["-i", os.path.expanduser(str(options["private_key_file"])), "-o", "IdentitiesOnly=yes"]
    if options.get("remote_user"):
        argv += ["-l", str(options["remote_user"])]
    host = str(options.get("host") or "")
    if not host:
        raise TransferError("no host address (ansible_host)")
    return [*argv, "--", host, remote]


# ------------------------------------------------------------------------------------------------ the stream
class _Tail:
    """The last ``limit`` bytes of a pipe, read by a thread until it closes."""

    def __init__(self, pipe: Any, limit: int = 65536) -> None:
        self.data = bytearray()
        self.limit = limit
        self.thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self.thread.start()

    def _read(self, pipe: Any) -> None:
        with pipe:
            for block in iter(lambda: pipe.read1(65536), b""):
                self.data += block
                del self.data[: max(0, len(self.data) - self.limit)]

    def text(self, wait: float = 2.0) -> str:
        self.thread.join(wait)
        return self.data.decode("utf-8", "replace").strip()


@dataclass
class Transfer:
    """What a stream did: bytes moved, seconds, both ends' exit codes and what they said, and why it stopped early."""

    moved: int = 0
    seconds: float = 0.0
    source_rc: int | None = None
    sink_rc: int | None = None
    source_error: str = ""
    sink_output: str = ""
    sink_error: str = ""
    stopped: str = ""
    progress: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.stopped and self.source_rc == 0 and self.sink_rc == 0


def _start(argv: Sequence[str], stdin: int) -> subprocess.Popen:
    """One end of a stream, in a session of its own (so that _stop ends its whole process group)."""
    return subprocess.Popen(
        list(argv), stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )


def _stop(process: subprocess.Popen) -> None:
    """End a process and whatever it started (its own session), TERM then KILL."""
    if process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def progress_line(label: str, moved: int, seconds: float, size: int | None) -> str:
    rate = moved / seconds if seconds > 0 else 0.0
    share = f" of {human(size)} ({100 * moved / size:.0f} %)" if size else ""
    return f"{label}: {human(moved)}{share} in {seconds:.0f} s, {human(rate)}/s"


def stream(
    source_argv: Sequence[str],
    sink_argv: Sequence[str],
    timeout: float,
    idle_timeout: float,
    label: str = "stream",
    size: int | None = None,
    every: float = 10.0,
    report: Callable[[str], None] | None = None,
    chunk: int = CHUNK,
) -> Transfer:
    """Run ``source_argv`` and ``sink_argv`` and pump the one's output into the other's input, a chunk at a time.

    A progress line (moved, share of ``size``, rate) goes to ``report`` every ``every`` seconds. The whole takes at
    most ``timeout`` seconds, and at most ``idle_timeout`` seconds may pass without a byte moving (the load's own
    work after the last byte counts against ``timeout`` only): past either, both processes are stopped."""
    result = Transfer()
    start = time.monotonic()
    try:
        source = _start(source_argv, subprocess.DEVNULL)
    except OSError as error:
        result.stopped = f"the source could not be started: {error}"
        return result
    try:
        sink = _start(sink_argv, subprocess.PIPE)
    except OSError as error:
        _stop(source)
        result.stopped = f"the sink could not be started: {error}"
        return result
    source_err, sink_out, sink_err = _Tail(source.stderr), _Tail(sink.stdout), _Tail(sink.stderr)
    state = {"moved": 0, "last": time.monotonic(), "broken": ""}

    def pump() -> None:
        reader, writer = source.stdout.fileno(), sink.stdin.fileno()  # type: ignore[union-attr]
        try:
            while True:
                data = os.read(reader, chunk)
                if not data:
                    break
                view = memoryview(data)
                while view:
                    view = view[os.write(writer, view) :]
                state["moved"] += len(data)
                state["last"] = time.monotonic()
        except OSError as error:
            state["broken"] = error.strerror or str(error)
        finally:
            for pipe in (sink.stdin, source.stdout):
                try:
                    pipe.close()  # type: ignore[union-attr]
                except OSError:
                    pass

    worker = threading.Thread(target=pump, daemon=True)
    worker.start()
    next_line = start + every
    while True:
        worker.join(0.2)
        now = time.monotonic()
        if not worker.is_alive():
            break
        if now - start > timeout:
            result.stopped = f"timed out after {timeout:.0f} s"
        elif now - state["last"] > idle_timeout:
            result.stopped = f"no byte moved for {idle_timeout:.0f} s"
        if result.stopped:
            _stop(source)
            _stop(sink)
            worker.join(10)
            break
        if every > 0 and now >= next_line:
            line = progress_line(label, state["moved"], now - start, size)
            result.progress.append(line)
            if report:
                report(line)
            next_line = now + every
    if state["broken"] and not result.stopped:
        _stop(source)  # the sink is gone: the source would wait on a full pipe for ever
    left = max(1.0, timeout - (time.monotonic() - start))
    try:
        result.sink_rc = sink.wait(left)
    except subprocess.TimeoutExpired:
        result.stopped = result.stopped or f"timed out after {timeout:.0f} s (docker load had every byte)"
        _stop(sink)
        result.sink_rc = sink.poll()
    try:
        result.source_rc = source.wait(10)
    except subprocess.TimeoutExpired:
        _stop(source)
        result.source_rc = source.poll()
    result.moved = int(state["moved"])
    result.seconds = time.monotonic() - start
    result.source_error, result.sink_output, result.sink_error = source_err.text(), sink_out.text(), sink_err.text()
    return result
