# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What node_facts' ``files`` section reports about a path: whether it exists, its type, mode, owner, size
and, for a regular file of at most :data:`MAX_HASH_BYTES`, its SHA-256 (read in chunks); and what its
``secrets`` section reports about a secret's file: ``stat`` only, never opened (:func:`secret_files_facts`).

Symlinks are followed (the target is described). A path that does not exist is a fact (``exists`` false);
one that cannot be read is described as far as ``stat`` goes, with ``sha256`` null and an ``error``. Only
regular files are opened, never blocking (a FIFO or a device is described, not read). And the one way the
collection writes a private JSON file on a node (:func:`write_private_json`: a release, the boot's journal).
No Ansible imports.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import tempfile
from typing import Any, Dict, Sequence

MAX_HASH_BYTES = 16 * 1024 * 1024
"""Files larger than this are not hashed (16 MiB: a role's configuration files are far smaller)."""
CHUNK_BYTES = 1024 * 1024
# stat says the path is not there: a fact, not a problem.
MISSING_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR})

FileFacts = Dict[str, Any]


def write_private_json(path: str, data: Any) -> None:
    """Write ``data`` as JSON to ``path``, 0600 in a 0700 directory (made when missing), atomically: a temporary
    file in the same directory, renamed over ``path``; nothing is left behind when writing fails."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=2, sort_keys=True)
            out.write("\n")
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def relative_paths(paths: Sequence[str]) -> list[str]:
    """The entries of ``paths`` that are not absolute (the module refuses them)."""
    return [path for path in paths if not os.path.isabs(path)]


def file_type(mode: int) -> str:
    """``file``, ``directory``, ``fifo``, ``socket``, ``char_device``, ``block_device`` or ``other``."""
    for test, name in (
        (stat.S_ISREG, "file"),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISFIFO, "fifo"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "char_device"),
        (stat.S_ISBLK, "block_device"),
    ):
        if test(mode):
            return name
    return "other"


def _empty(exists: bool | None, error: str | None = None) -> FileFacts:
    return {
        "exists": exists,
        "type": None,
        "sha256": None,
        "mode": None,
        "owner": None,
        "group": None,
        "size": None,
        "error": error,
    }


def _limit_text(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit % (1024 * 1024) == 0 else f"{limit} bytes"


def _message(error: OSError) -> str:
    return error.strerror or str(error)


def sha256_of(path: str, limit: int = MAX_HASH_BYTES) -> tuple[str | None, str | None]:
    """(hex digest, None), or (None, why not). Opens without blocking and hashes only a regular file."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb", buffering=0) as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None, "not a regular file when opened (replaced while being read)"
        digest = hashlib.sha256()
        read = 0
        for chunk in iter(lambda: handle.read(CHUNK_BYTES), b""):
            read += len(chunk)
            if read > limit:
                return None, f"grew over {_limit_text(limit)} while being read: not hashed"
            digest.update(chunk)
    return digest.hexdigest(), None


def file_facts(path: str, limit: int = MAX_HASH_BYTES) -> tuple[FileFacts, str | None]:
    """The facts of one absolute ``path``, and the message of an unexpected error (for ``problems``), if any.

    ``exists`` is null only when stat fails otherwise than "not there" (a parent directory that cannot be
    searched, a symlink loop): whether the path exists cannot be told then.
    """
    try:
        info = os.stat(path)
    except OSError as error:
        if error.errno not in MISSING_ERRNOS:
            return _empty(None, _message(error)), _message(error)
        try:
            target = os.readlink(path)
        except OSError:
            return _empty(False), None  # not a symlink: simply not there
        return _empty(False, f"a symlink to a missing target ({target})"), None
    facts = _empty(True)
    facts.update(
        type=file_type(info.st_mode),
        mode=format(stat.S_IMODE(info.st_mode), "04o"),
        owner=info.st_uid,
        group=info.st_gid,
        size=info.st_size,
    )
    if facts["type"] != "file":
        return facts, None
    if info.st_size > limit:
        facts["error"] = f"larger than {_limit_text(limit)} ({info.st_size} bytes): not hashed"
        return facts, None
    try:
        facts["sha256"], facts["error"] = sha256_of(path, limit)
    except OSError as error:
        facts["error"] = _message(error)
        return facts, facts["error"]
    return facts, None


def files_facts(
    paths: Sequence[str], limit: int = MAX_HASH_BYTES
) -> tuple[dict[str, FileFacts], list[tuple[str, str]]]:
    """``{path: facts}`` for every path (in the order given, once each), and (path, message) per unexpected
    error."""
    found: dict[str, FileFacts] = {}
    problems: list[tuple[str, str]] = []
    for path in paths:
        if path in found:
            continue
        facts, message = file_facts(path, limit)
        found[path] = facts
        if message is not None:
            problems.append((path, message))
    return found, problems


def secret_file_facts(path: str) -> tuple[FileFacts, str | None]:
    """A secret's file as ``stat`` sees it (followed through symlinks, as Docker binds it): ``exists``, ``type``,
    ``mode``, ``owner``, ``group``, ``error``; never opened, never hashed, its size not reported. The message of
    an unexpected error comes second (for ``problems``)."""
    try:
        info = os.stat(path)
    except OSError as error:
        facts = {"exists": None, "type": None, "mode": None, "owner": None, "group": None, "error": _message(error)}
        if error.errno in MISSING_ERRNOS:
            facts.update(exists=False, error=None)
            return facts, None
        return facts, _message(error)
    return {
        "exists": True,
        "type": file_type(info.st_mode),
        "mode": format(stat.S_IMODE(info.st_mode), "04o"),
        "owner": info.st_uid,
        "group": info.st_gid,
        "error": None,
    }, None


def secret_files_facts(paths: Sequence[str]) -> tuple[dict[str, FileFacts], list[tuple[str, str]]]:
    """``{path: facts}`` (:func:`secret_file_facts`) for every path, once each, and (path, message) per
    unexpected error."""
    found: dict[str, FileFacts] = {}
    problems: list[tuple[str, str]] = []
    for path in paths:
        if path not in found:
            found[path], message = secret_file_facts(path)
            if message is not None:
                problems.append((path, message))
    return found, problems
