# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The weights sync's two ends on the nodes (issue 30): a short-lived read-only file server on the source, and the
puller on a target. Python standard library only: the controller sends this file's text to each node's ``python3``
over SSH (``plugin_utils/weights/transfer.py``), so that no node needs a key to another node.

The server (:func:`serve`) binds the address the plan pairs (the source's fabric address where the plan has one) on
a free port, says it (``{"port": N}``) and answers only:

- ``GET /file/<name>``: the file, or the part a ``Range: bytes=START-`` header asks for;
- ``GET /sha256/<name>?length=N``: the SHA-256 of the file's first N bytes (a puller's check of a partial copy);

for the names it was given (the plan's list for that target, each a plain relative path under the weights path),
with the one-time token it was given (an ``X-Dgxspark-Token`` header), and nothing else. It ends when its input
closes (the controller's SSH process ends), or after ``lifetime`` seconds.

The puller (:func:`pull`) writes each file under ``<root>/.dgxspark-partial/`` (a name starting with ``.``: the
manifest leaves it out), hashing as it writes. A partial copy left by an interrupted run is kept only where its
SHA-256 is the source's for that many bytes (asked of the server): then the file continues from there, with a Range
request, and never starts from zero; otherwise it starts again. A file that arrived whole is compared with the
source manifest's SHA-256 (the server's hash of the whole file where the manifest has none yet): a mismatch fails,
naming the file. A match is moved into place (replacing a symlink, never writing through one) and remembered in the
node's manifest cache (``_weights_manifest``), so that the next preflight does not hash it again. With ``stage``
(ranks are running on the node) a checked file is left in the partial directory, not put in place: the next run
without ``stage`` finds it whole (its SHA-256 the source's), moves no byte of it again, and puts it in place.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import os
import posixpath
import socket
import stat
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict
from urllib.parse import parse_qs, quote, unquote, urlsplit

from ansible_collections.dgxspark.cluster.plugins.module_utils._weights_manifest import (
    DEFAULT_CACHE_DIR,
    _Cache,
)

PARTIAL_DIR = ".dgxspark-partial"
TOKEN_HEADER = "X-Dgxspark-Token"
CHUNK = 1024 * 1024
EVERY = 0.5
"""Seconds between two byte counts the puller reports."""

Emit = Callable[[Dict[str, Any]], None]


class PullError(RuntimeError):
    """A file could not be pulled: the message names it."""


def name_problem(name: Any) -> str:
    """Why ``name`` is not a plain path relative to the weights path (empty when it is one)."""
    if not isinstance(name, str) or not name or not name.isprintable():
        return "not a printable name"
    parts = name.split("/")
    if name.startswith("/") or "\\" in name or ".." in parts or "" in parts or "." in parts:
        return f"{name}: not a plain relative path"
    if parts[0] == PARTIAL_DIR:
        return f"{name}: inside {PARTIAL_DIR}"
    return ""


def partial_path(root: str, name: str) -> str:
    """Where a file's copy in progress is kept: under ``<root>/.dgxspark-partial/`` (the manifest leaves it out)."""
    return os.path.join(root, PARTIAL_DIR, name)


def _prefix_sha256(path: str, length: int) -> str:
    digest = hashlib.sha256()
    left = length
    with open(path, "rb") as handle:
        while left > 0:
            block = handle.read(min(CHUNK, left))
            if not block:
                raise ValueError(f"shorter than {length} bytes")
            digest.update(block)
            left -= len(block)
    return digest.hexdigest()


# ------------------------------------------------------------------------------------------------ the server
class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return  # nothing on stderr: the controller reads this end's output

    def _refuse(self, code: int, why: str) -> None:
        body = why.encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        self.server.touch()
        given = self.headers.get(TOKEN_HEADER) or ""
        if not hmac.compare_digest(given.encode("utf-8"), self.server.token.encode("utf-8")):
            self._refuse(403, "wrong token")
            return
        parts = urlsplit(self.path)
        kind, _slash, quoted = parts.path.lstrip("/").partition("/")
        name = unquote(quoted)
        if kind not in ("file", "sha256") or name not in self.server.names:
            self._refuse(404, f"not served: {name}")
            return
        full = os.path.join(self.server.root, name)
        try:
            with open(full, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if kind == "sha256":
                    length = int((parse_qs(parts.query).get("length") or [str(size)])[0])
                    if length < 0 or length > size:
                        self._refuse(416, f"{name}: {length} bytes asked, {size} there")
                        return
                    self._refuse(200, _prefix_sha256(full, length))
                    return
                start = _range_start(self.headers.get("Range"))
                if start is None or start > size:
                    self._refuse(416, f"{name}: a Range of bytes=START- within its {size} bytes only")
                    return
                self.send_response(206 if start else 200)
                self.send_header("Content-Length", str(size - start))
                self.send_header("X-Dgxspark-Size", str(size))
                self.end_headers()
                self.wfile.flush()
                if size > start:
                    self.connection.sendfile(handle, start, size - start)
        except OSError as error:
            self._refuse(500, f"{name}: {error.strerror or error}")
        except ValueError as error:
            self._refuse(500, f"{name}: {error}")
        finally:
            self.server.touch()


def _range_start(header: str | None) -> int | None:
    if not header:
        return 0
    if not header.startswith("bytes=") or not header.endswith("-"):
        return None
    text = header[len("bytes=") : -1]
    return int(text) if text.isdigit() else None


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: str, root: str, names: list[str], token: str) -> None:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self.address_family = family
        super().__init__((address, 0), _Handler)
        self.root = root
        self.names = frozenset(names)
        self.token = token
        self.last = time.monotonic()

    def touch(self) -> None:
        self.last = time.monotonic()


def serve(config: dict[str, Any], stdin: Any, emit: Emit) -> int:
    """Serve ``config["names"]`` under ``config["root"]`` on ``config["address"]`` until ``stdin`` closes or
    ``config["lifetime"]`` seconds pass. Says ``{"port": N}`` first (or ``{"error": ...}`` and returns 1)."""
    root = str(config.get("root") or "")
    names = [str(name) for name in config.get("names") or []]
    bad = [problem for problem in map(name_problem, names) if problem]
    if not root.startswith("/") or bad:
        emit({"error": f"refused: {'; '.join(bad) or 'the weights path is not absolute'}"})
        return 1
    if not os.path.isdir(root):
        emit({"error": f"{root} is not a directory here: the source has no weights to send"})
        return 1
    missing = [name for name in names if not os.path.isfile(os.path.join(root, name))]
    if missing:
        emit({"error": f"{len(missing)} file(s) the plan sends are not under {root} here: {', '.join(missing[:6])}"})
        return 1
    try:
        server = _Server(str(config.get("address") or "127.0.0.1"), root, names, str(config["token"]))
    except OSError as error:
        emit({"error": f"cannot listen on {config.get('address')}: {error.strerror or error}"})
        return 1
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    emit({"port": server.server_address[1]})
    ended = threading.Event()
    _watch(stdin, ended)
    ended.wait(float(config.get("lifetime") or 86400))
    server.shutdown()
    server.server_close()
    return 0


# ------------------------------------------------------------------------------------------------ the puller
def _safe_parent(root: str, name: str) -> str:
    """Make the directories of ``name`` under ``root`` (real directories, never through a symlink); its path."""
    directory = root
    for part in posixpath.dirname(name).split("/") if posixpath.dirname(name) else []:
        directory = os.path.join(directory, part)
        try:
            info = os.lstat(directory)
        except FileNotFoundError:
            os.mkdir(directory, 0o755)
            continue
        if not stat.S_ISDIR(info.st_mode):
            raise PullError(f"{name}: {directory} is not a directory (a symlink or a file): not written through")
    return os.path.join(root, name)


class _Puller:
    def __init__(self, config: dict[str, Any], emit: Emit, clock: Callable[[], float]) -> None:
        self.root = str(config["root"])
        self.host = str(config["address"])
        self.port = int(config["port"])
        self.token = str(config["token"])
        self.timeout = float(config.get("idle_timeout") or 300)
        self.emit = emit
        self.clock = clock
        self.connection: http.client.HTTPConnection | None = None
        self.moved = 0
        self.reported = clock()
        self.stage = bool(config.get("stage"))
        self.gone = threading.Event()
        """Set when the controller's connection closes: the file stops, its partial copy kept."""

    def _request(self, path: str, headers: dict[str, str]) -> http.client.HTTPResponse:
        for attempt in (1, 2):
            if self.connection is None:
                self.connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self.connection.request("GET", path, headers={TOKEN_HEADER: self.token, **headers})
                return self.connection.getresponse()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.connection.close()
                self.connection = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _text(self, path: str, name: str) -> str:
        response = self._request(path, {})
        body = response.read().decode("utf-8", "replace")
        if response.status != 200:
            raise PullError(f"{name}: the source answered {response.status}: {body}")
        return body.strip()

    def source_sha256(self, name: str, length: int) -> str:
        return self._text(f"/sha256/{quote(name)}?length={length}", name)

    def _count(self, name: str, count: int) -> None:
        self.moved += count
        now = self.clock()
        if now - self.reported >= EVERY:
            self.reported = now
            self.emit({"event": "bytes", "moved": self.moved, "name": name})

    def one(self, item: dict[str, Any], cache_entries: dict[str, Any]) -> bool:
        """Pull one file; True when it was checked and left staged (``stage``), False when it was put in place."""
        name, size, expected = str(item["name"]), int(item["size"]), item.get("sha256")
        problem = name_problem(name)
        if problem:
            raise PullError(f"refused: {problem}")
        final = _safe_parent(self.root, name)
        partial = _safe_parent(self.root, f"{PARTIAL_DIR}/{name}")
        digest = hashlib.sha256()
        start = 0
        try:
            held = os.lstat(partial)
        except FileNotFoundError:
            held = None
        if held is not None and not stat.S_ISREG(held.st_mode):
            raise PullError(f"{name}: {partial} is not a regular file: move it away")
        if held is not None and 0 < held.st_size <= size:
            ours = _prefix_sha256(partial, held.st_size)
            if ours == self.source_sha256(name, held.st_size):
                start = held.st_size
                with open(partial, "rb") as handle:
                    for block in iter(lambda: handle.read(CHUNK), b""):
                        digest.update(block)
                self.emit({"event": "resumed", "name": name, "offset": start})
            else:
                self.emit({"event": "restarted", "name": name, "offset": held.st_size})
        self.emit({"event": "file", "name": name, "size": size, "offset": start})
        response = self._request(f"/file/{quote(name)}", {"Range": f"bytes={start}-"} if start else {})
        if response.status not in (200, 206) or (start and response.status != 206):
            body = response.read().decode("utf-8", "replace")
            raise PullError(f"{name}: the source answered {response.status}: {body.strip()}")
        there = int(response.getheader("X-Dgxspark-Size") or -1)
        if there != size:
            response.read()
            raise PullError(f"{name}: {there} bytes on the source now, {size} when planned: run weights.yml again")
        flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | (0 if start else os.O_TRUNC)
        fd = os.open(partial, flags, 0o644)
        with os.fdopen(fd, "wb") as out:
            out.seek(start)
            out.truncate(start)
            left = size - start
            try:
                while left > 0:
                    if self.gone.is_set():
                        raise PullError(
                            f"{name}: the controller's connection closed after {size - left} of {size} bytes "
                            "(kept, to resume)"
                        )
                    block = response.read(min(CHUNK, left))
                    if not block:
                        break
                    out.write(block)
                    digest.update(block)
                    left -= len(block)
                    self._count(name, len(block))
            except socket.timeout as error:
                raise PullError(f"{name}: nothing came from the source for {self.timeout:.0f} s") from error
            if not left:
                response.read()  # the end of this answer (nothing, or an empty one), so the connection serves the next
            out.flush()
            os.fsync(out.fileno())
        if left:
            raise PullError(f"{name}: the source stopped after {size - left} of {size} bytes (kept, to resume)")
        got = digest.hexdigest()
        wanted = expected or self.source_sha256(name, size)
        if got != wanted:
            os.unlink(partial)
            raise PullError(
                f"{name}: arrived with SHA-256 {got[:16]}..., the source's manifest says {str(wanted)[:16]}...: "
                "not put in place"
            )
        if self.stage:
            self.emit({"event": "staged", "name": name, "sha256": got})
            return True  # checked, and kept beside the weights: not put in place under a running rank
        os.replace(partial, final)
        info = os.stat(final)
        cache_entries[name] = {"size": info.st_size, "mtime_ns": info.st_mtime_ns, "sha256": got}
        self.emit({"event": "arrived", "name": name, "sha256": got})
        return False


def remember(root: str, entries: dict[str, Any], cache_dir: str = DEFAULT_CACHE_DIR) -> str:
    """Add ``entries`` (name to size, mtime_ns, sha256) to the manifest cache of ``root``; an error, or empty."""
    if not entries or not cache_dir:
        return ""
    cache = _Cache(cache_dir, os.path.realpath(root))
    cache.load()
    if cache.error:
        return f"the weights hash cache was not refreshed: {cache.error}"
    merged = dict(cache.entries)
    merged.update(entries)
    try:
        cache.save(merged)
    except OSError as error:
        return f"the weights hash cache could not be written: {error.strerror or error}"
    return ""


def _watch(stdin: Any, gone: threading.Event) -> None:
    """Set ``gone`` when ``stdin`` closes (the controller's SSH process ended)."""

    def read() -> None:
        try:
            while stdin.read(4096):
                pass
        except (OSError, ValueError):
            pass
        gone.set()

    threading.Thread(target=read, daemon=True).start()


def pull(config: dict[str, Any], emit: Emit, clock: Callable[[], float] = time.monotonic, stdin: Any = None) -> int:
    """Pull ``config["files"]`` (name, size, sha256 each) into ``config["root"]`` from the server at
    ``config["address"]``:``config["port"]``. Says what happens as events; the last is ``done`` or ``failed``.
    ``stdin`` given: when it closes (the controller is gone) the file in progress stops, its partial copy kept."""
    root = str(config.get("root") or "")
    if not root.startswith("/"):
        emit({"event": "failed", "msg": f"the weights path {root!r} is not absolute"})
        return 1
    puller = _Puller(config, emit, clock)
    if stdin is not None:
        _watch(stdin, puller.gone)
    arrived: dict[str, Any] = {}
    staged: list[str] = []
    current = ""
    try:
        os.makedirs(root, 0o755, exist_ok=True)
        for item in config.get("files") or []:
            current = str(item.get("name"))
            if puller.one(item, arrived):
                staged.append(current)
        current = ""
    except PullError as error:
        failure = str(error)
    except (OSError, http.client.HTTPException, ValueError) as error:
        failure = f"{current or root}: {getattr(error, 'strerror', None) or error}"
    else:
        failure = ""
    finally:
        if puller.connection is not None:
            puller.connection.close()
    note = remember(root, arrived, str(config.get("cache_dir", DEFAULT_CACHE_DIR)))
    emit({"event": "bytes", "moved": puller.moved, "name": current})
    if failure:
        emit(
            {
                "event": "failed",
                "msg": failure,
                "name": current,
                "arrived": sorted(arrived),
                "cache": note,
                "staged": staged,
            }
        )
        return 1
    emit({"event": "done", "arrived": sorted(arrived), "moved": puller.moved, "cache": note, "staged": staged})
    return 0


def main(kind: str, stdin: Any, write: Callable[[str], None]) -> int:
    """The entry point the controller's bootstrap calls: ``kind`` ``serve`` or ``pull``, the configuration as the
    first line of ``stdin``, each event written as one JSON line through ``write``."""

    def emit(event: dict[str, Any]) -> None:
        write(json.dumps(event, sort_keys=True) + "\n")

    config = json.loads(stdin.readline())
    if kind == "serve":
        return serve(config, stdin, emit)
    return pull(config, emit, stdin=stdin)
