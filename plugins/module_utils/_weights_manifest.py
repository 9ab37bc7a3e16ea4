# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_facts' ``weights`` section: a manifest of the weights directory (each file's name relative to it,
size and SHA-256), so that the controller can tell whether every node holds the same weights.

Hashing is bounded and remembered:

- every file is listed with its size (a stat walk: milliseconds for a model directory of a few hundred
  files); at most :data:`MAX_FILES` files, past which the walk stops and says so (a weights path such as
  ``/`` is not a model directory);
- a file's SHA-256 is taken from the node's cache when its size and modification time (nanoseconds) are
  the ones it was hashed at, so a second preflight hashes nothing that did not change;
- the other files are hashed smallest first (``config.json``, the safetensors index and the tokenizer,
  which tell revisions apart, before the shards) until ``budget_seconds`` have passed; a file the budget
  stops halfway is not hashed, and every file not hashed keeps its size, which the controller still
  compares. The next run goes on where this one stopped: what was hashed is in the cache.

The cache is one JSON file per weights directory (named by the SHA-256 of its real path) under the cache
directory, which is created 0700; the file is written 0600, atomically, and only when it changed. A cache
file that is a symlink, belongs to another user or can be written by others is not trusted (the hashes it
holds would hide a changed file): it is ignored and reported. Names starting with ``.`` are left out: they
are download tools' state (``.cache/huggingface/``, whose metadata differs from node to node) and copies
in progress (rsync's ``.name.XXXXXX``), not weights. A symlinked file is followed (a Hugging Face cache
links its snapshot's files to blobs); a symlinked directory is not, and is reported. No Ansible imports.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import tempfile
import time
from typing import Any, Callable, Dict, Tuple

DEFAULT_CACHE_DIR = "/var/cache/dgxspark-cluster"
DEFAULT_HASH_SECONDS = 60.0
MAX_FILES = 10000
CHUNK_BYTES = 8 * 1024 * 1024
CACHE_VERSION = 1
CACHE_PREFIX = "weights-"
_HEX = frozenset("0123456789abcdef")

Problem = Tuple[str, str]
"""(source, message): an unexpected error, for node_facts' ``problems``."""
Entry = Dict[str, Any]


def cache_file(cache_dir: str, root: str) -> str:
    """The cache file of the weights directory whose real path is ``root``."""
    digest = hashlib.sha256(root.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return os.path.join(cache_dir, f"{CACHE_PREFIX}{digest}.json")


def _message(error: OSError) -> str:
    return error.strerror or str(error)


def _is_sha256(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 64 and set(value) <= _HEX


class _Walk:
    """Every regular file under a root: relative name to its stat result, and what could not be listed."""

    def __init__(self, root: str, limit: int) -> None:
        self.root = root
        self.limit = limit
        self.found: dict[str, os.stat_result] = {}
        self.problems: list[Problem] = []
        self.truncated = False
        self.root_error: str | None = None

    def run(self) -> None:
        for directory, dirnames, filenames in os.walk(self.root, onerror=self._unlistable):
            kept = []
            for name in sorted(dirnames):
                if name.startswith("."):
                    continue
                full = os.path.join(directory, name)
                if os.path.islink(full):
                    self.problems.append((full, "a symlink to a directory: not followed, its files are not listed"))
                    continue
                kept.append(name)
            dirnames[:] = kept
            for name in sorted(filenames):
                if name.startswith("."):
                    continue
                if len(self.found) >= self.limit:
                    self.truncated = True
                    return
                self._add(os.path.join(directory, name))

    def _add(self, full: str) -> None:
        try:
            info = os.stat(full)
        except OSError as error:
            if error.errno == errno.ENOENT and os.path.islink(full):
                self.problems.append((full, "a symlink whose target is missing"))
            elif error.errno != errno.ENOENT:  # gone since it was listed: not a problem
                self.problems.append((full, _message(error)))
            return
        if stat.S_ISREG(info.st_mode):
            self.found[os.path.relpath(full, self.root)] = info
        elif not stat.S_ISDIR(info.st_mode):
            self.problems.append((full, "not a regular file: left out"))

    def _unlistable(self, error: OSError) -> None:
        if error.filename in (None, self.root):
            self.root_error = f"cannot list {self.root}: {_message(error)}"
        self.problems.append((error.filename or self.root, _message(error)))


class _Cache:
    """The hashes remembered for one weights directory, by relative name: size, mtime_ns, sha256."""

    def __init__(self, directory: str, root: str) -> None:
        self.directory = directory
        self.path = cache_file(directory, root) if directory else None
        self.root = root
        self.entries: dict[str, Entry] = {}
        self.error: str | None = None
        self.read_ok = False

    def load(self) -> None:
        if self.path is None:
            return
        try:
            info = os.lstat(self.path)
        except OSError as error:
            if error.errno not in (errno.ENOENT, errno.ENOTDIR):
                self.error = f"could not read: {_message(error)}"
            return
        if not stat.S_ISREG(info.st_mode):
            self.error = "not a regular file (a symlink?): not trusted, ignored"
            return
        if info.st_uid != os.geteuid() or info.st_mode & 0o022:
            self.error = (
                f"owned by uid {info.st_uid} with mode {stat.S_IMODE(info.st_mode):04o}: a cache that another user "
                "can write is not trusted, ignored"
            )
            return
        try:
            with open(self.path, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError) as error:
            self.error = f"could not read: {error}"
            return
        if not isinstance(data, dict) or data.get("version") != CACHE_VERSION or data.get("root") != self.root:
            self.error = f"not a version {CACHE_VERSION} cache of {self.root}: ignored"
            return
        files = data.get("files")
        if isinstance(files, dict):
            self.entries = {
                name: entry
                for name, entry in files.items()
                if isinstance(entry, dict)
                and isinstance(entry.get("size"), int)
                and isinstance(entry.get("mtime_ns"), int)
                and _is_sha256(entry.get("sha256"))
            }
        self.read_ok = True

    def hash_of(self, name: str, info: os.stat_result) -> str | None:
        entry = self.entries.get(name)
        if entry and entry["size"] == info.st_size and entry["mtime_ns"] == info.st_mtime_ns:
            return str(entry["sha256"])
        return None

    def save(self, entries: dict[str, Entry]) -> bool:
        """Write ``entries`` when they differ from what was read; True when the file was written."""
        if self.path is None or (self.read_ok and entries == self.entries):
            return False
        if not os.path.isdir(self.directory):
            os.makedirs(self.directory, mode=0o700)
        handle, temporary = tempfile.mkstemp(prefix=".weights-", dir=self.directory)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump({"version": CACHE_VERSION, "root": self.root, "files": entries}, out, sort_keys=True)
            os.chmod(temporary, 0o600)
            os.replace(temporary, self.path)
        except BaseException:
            if os.path.exists(temporary):
                os.unlink(temporary)
            raise
        return True


def _drop_from_page_cache(fd: int) -> None:
    """Leave the file's pages to the kernel to drop: on a GB10 the page cache is the GPU's memory too."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is not None:
        try:
            advise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError:
            pass  # advice only


def hash_file(path: str, expected: os.stat_result, deadline: float, clock: Callable[[], float]) -> str | None:
    """The file's SHA-256, or None when ``deadline`` passed before it was read to the end. Raises OSError
    when it cannot be read, or ValueError when it changed (size or mtime) while it was read."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb", buffering=0) as handle:
        digest = hashlib.sha256()
        finished = False
        while clock() < deadline:
            chunk = handle.read(CHUNK_BYTES)
            if not chunk:
                finished = True
                break
            digest.update(chunk)
        after = os.fstat(handle.fileno())
        _drop_from_page_cache(handle.fileno())
    if not finished:
        return None
    if (after.st_size, after.st_mtime_ns) != (expected.st_size, expected.st_mtime_ns):
        raise ValueError("changed while being hashed: not hashed")
    return digest.hexdigest()


def _absent(path: str, exists: bool, error: str | None, budget: float) -> dict[str, Any]:
    return {
        "path": path,
        "root": None,
        "exists": exists,
        "error": error,
        "files": {},
        "file_count": 0,
        "total_bytes": 0,
        "complete": False,
        "truncated": False,
        "hashed": {"files": 0, "bytes": 0, "seconds": 0.0},
        "from_cache": 0,
        "not_hashed": 0,
        "budget_seconds": budget,
        "cache": {"path": None, "read": False, "written": False, "error": None},
    }


def weights_facts(
    path: str | None,
    cache_dir: str = DEFAULT_CACHE_DIR,
    budget_seconds: float = DEFAULT_HASH_SECONDS,
    write_cache: bool = True,
    clock: Callable[[], float] = time.monotonic,
    max_files: int = MAX_FILES,
) -> tuple[dict[str, Any], list[Problem]]:
    """The manifest of ``path`` (a directory, or a single file), and the unexpected errors met on the way.

    ``cache_dir`` empty: no cache. ``write_cache`` false (check mode): the cache is read, never written.
    ``clock`` (monotonic seconds) times the hashing budget.
    """
    if not path:
        return {"path": None}, []
    if not os.path.exists(path):
        return _absent(path, False, None, budget_seconds), []
    root = os.path.realpath(path)
    problems: list[Problem] = []
    if os.path.isdir(root):
        walk = _Walk(root, max_files)
        walk.run()
        listed, problems, truncated = walk.found, walk.problems, walk.truncated
        if walk.root_error:
            return _absent(path, True, walk.root_error, budget_seconds), problems
    else:
        try:
            info = os.stat(root)
        except OSError as error:
            return _absent(path, True, _message(error), budget_seconds), [(root, _message(error))]
        if not stat.S_ISREG(info.st_mode):
            return _absent(path, True, "neither a directory nor a regular file", budget_seconds), []
        listed, truncated = {os.path.basename(root): info}, False
    facts = _absent(path, True, None, budget_seconds)
    facts["root"] = root
    facts["truncated"] = truncated
    if truncated:
        facts["error"] = f"more than {max_files} files under {root}: not a model directory? Nothing was hashed"
    cache = _Cache(cache_dir, root)
    cache.load()
    files: dict[str, Entry] = {}
    remembered: dict[str, Entry] = {}
    pending: list[str] = []
    for name in sorted(listed):
        info = listed[name]
        digest = cache.hash_of(name, info)
        files[name] = {"size": info.st_size, "sha256": digest}
        if digest is not None:
            remembered[name] = {"size": info.st_size, "mtime_ns": info.st_mtime_ns, "sha256": digest}
            facts["from_cache"] += 1
        else:
            pending.append(name)
    started = clock()
    deadline = started + budget_seconds
    if not truncated:
        for name in sorted(pending, key=lambda n: (listed[n].st_size, n)):
            if clock() >= deadline:
                break
            full = os.path.join(root, name) if os.path.isdir(root) else root
            try:
                digest = hash_file(full, listed[name], deadline, clock)
            except (OSError, ValueError) as error:
                problems.append((full, _message(error) if isinstance(error, OSError) else str(error)))
                continue
            if digest is None:
                break  # the budget ran out inside this file
            files[name]["sha256"] = digest
            remembered[name] = {"size": listed[name].st_size, "mtime_ns": listed[name].st_mtime_ns, "sha256": digest}
            facts["hashed"]["files"] += 1
            facts["hashed"]["bytes"] += listed[name].st_size
    facts["hashed"]["seconds"] = round(clock() - started, 3)
    facts.update(
        files=files,
        file_count=len(files),
        total_bytes=sum(entry["size"] for entry in files.values()),
        not_hashed=sum(1 for entry in files.values() if entry["sha256"] is None),
    )
    facts["complete"] = not truncated and facts["not_hashed"] == 0
    facts["cache"].update(path=cache.path, read=cache.read_ok, error=cache.error)
    if cache.error:
        problems.append((str(cache.path), f"weights hash cache {cache.error}"))
    if write_cache and not truncated and cache.path is not None:
        try:
            facts["cache"]["written"] = cache.save(remembered)
        except OSError as error:
            facts["cache"]["error"] = f"could not write: {_message(error)}"
            problems.append((cache.path, f"weights hash cache could not be written: {_message(error)}"))
    return facts, problems
