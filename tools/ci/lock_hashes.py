# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The hashes of the Python locks (requirements/constraints-*.txt) and what the venv recipes take from them.

    python tools/ci/lock_hashes.py hash LOCK...          add the sha256 of every file of every pinned version
    python tools/ci/lock_hashes.py pins LOCK             print the pins alone, name==version, one a line
    python tools/ci/lock_hashes.py select LOCK NAME...   print those names' entries, hashes included
    python tools/ci/lock_hashes.py resolvable IN OUT     copy IN to OUT, each file it constrains (-c) by its pins alone

`hash` rewrites each LOCK in place, every version as it was, each pin followed by the sha256 of EVERY file
the index holds for that version (the sdist and the wheels of every platform and Python), so that the lock
installs wherever the pinned versions do, in pip's hash-checking mode: a file whose content changed on the
index fails the install. The hashes come from the index's JSON Simple API (PEP 691), the one pip itself
reads: https://pypi.org/simple/<name>/ unless LOCK_INDEX_URL names another. (PyPI's JSON API per release,
/pypi/<name>/<version>/json, is not reachable from CI machines; the Simple API is.)

`select` gives the venv recipes pip's own entry: the pip that `python -m venv` bundles (ensurepip's) does not
take a requirement's hashes from a constraints file, so the pinned pip is installed from its entry with
`-r`; from then on the pinned pip does take them (`-r X.in -c LOCK --require-hashes`).

`resolvable` lets tools/ci/lock.sh resolve an .in that constrains itself by another, hashed, lock (ee.in by
constraints-py313.txt): a hash in a constraints file turns on hash-checking mode for the whole install,
which refuses every package that lock does not pin.

Standard library only, but for the version comparison, which uses the `packaging` that pip vendors (run it
with a Python that has pip: pyenv's or a venv's).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

INDEX_URL = os.environ.get("LOCK_INDEX_URL", "https://pypi.org/simple/")
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
HASH_NOTE = (
    "# Hashes: sha256 of every file the index holds for each pinned version (tools/ci/lock_hashes.py);"
    " installed with --require-hashes."
)
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$")
HASH = re.compile(r"^--hash=sha256:([0-9a-f]{64})$")
ARCHIVES = (".tar.gz", ".zip", ".tar.bz2", ".tgz", ".tar")


class Entry(NamedTuple):
    """One requirement of a lock: name==version and the sha256 of its files."""

    name: str
    version: str
    hashes: list[str]


def canonical_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def same_version(a: str, b: str) -> bool:
    try:
        from pip._vendor.packaging.version import InvalidVersion, Version
    except ImportError:  # pragma: no cover - a Python without pip
        return a.lower() == b.lower()
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a.lower() == b.lower()


def read_lock(path: Path) -> tuple[list[str], list[Entry]]:
    """The comment lines before the first pin, and every entry: (name, version, [sha256, ...])."""
    header: list[str] = []
    entries: list[Entry] = []
    logical = re.sub(r"\\\n", " ", path.read_text(encoding="utf-8"))
    for number, line in enumerate(logical.splitlines(), 1):
        if line.startswith("#") and not entries:
            header.append(line)
            continue
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        pin = PIN.match(words[0])
        hashes = [HASH.match(word) for word in words[1:]]
        if not pin or not all(hashes):
            sys.exit(f"{path}: entry {number} is not `name==version [--hash=sha256:...]`: {line.strip()}")
        entries.append(Entry(pin[1], pin[2], [match[1] for match in hashes if match]))
    return header, entries


def write_lock(path: Path, header: list[str], entries: list[Entry]) -> None:
    lines = [line for line in header if not line.startswith("# Hashes:")]
    if any(entry.hashes for entry in entries):
        lines.append(HASH_NOTE)
    for entry in entries:
        pin = f"{entry.name}=={entry.version}"
        lines.append(" \\\n    ".join([pin, *(f"--hash=sha256:{h}" for h in sorted(entry.hashes))]))
    tmp = path.with_name(path.name + ".hashing")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(path)


def _fetch(name: str) -> list[dict]:
    url = INDEX_URL.rstrip("/") + f"/{canonical_name(name)}/"
    request = urllib.request.Request(url, headers={"Accept": SIMPLE_JSON, "Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=120) as response:
        body = response.read()
        if response.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        kind = response.headers.get("Content-Type", "")
    if SIMPLE_JSON not in kind:
        sys.exit(f"{url} answered {kind!r}, not the JSON Simple API (PEP 691): set LOCK_INDEX_URL to one that has it")
    return json.loads(body)["files"]


def _file_version(filename: str) -> str | None:
    if filename.endswith(".whl"):
        return filename[: -len(".whl")].split("-")[1]
    for extension in ARCHIVES:
        if filename.endswith(extension):
            return filename[: -len(extension)].rpartition("-")[2]
    return None  # .egg, .exe, .msi, .rpm: formats pip does not install


def version_hashes(name: str, version: str) -> dict[str, str]:
    """filename -> sha256 of every file the index holds for NAME at VERSION."""
    found = {}
    for entry in _fetch(name):
        file_version = _file_version(entry["filename"])
        if file_version is not None and same_version(file_version, version):
            digest = entry.get("hashes", {}).get("sha256")
            if not digest:
                sys.exit(f"{name} {version}: the index gives no sha256 for {entry['filename']}")
            found[entry["filename"]] = digest
    if not found:
        sys.exit(f"{name}=={version}: the index ({INDEX_URL}) holds no file of that version")
    return found


def cmd_hash(locks: list[Path]) -> int:
    parsed = {path: read_lock(path) for path in locks}
    wanted = sorted({(canonical_name(e.name), e.version) for lock in parsed.values() for e in lock[1]})
    with ThreadPoolExecutor(max_workers=6) as pool:
        found = dict(zip(wanted, pool.map(lambda nv: version_hashes(*nv), wanted), strict=True))
    for path, (header, entries) in parsed.items():
        hashed = [
            Entry(e.name, e.version, sorted(set(found[canonical_name(e.name), e.version].values()))) for e in entries
        ]
        write_lock(path, header, hashed)
        files = sum(len(e.hashes) for e in hashed)
        print(f"{path}: {len(hashed)} pins, {files} hashes (every file of each pinned version)")
    return 0


def cmd_pins(lock: Path) -> int:
    for entry in read_lock(lock)[1]:
        print(f"{entry.name}=={entry.version}")
    return 0


def cmd_select(lock: Path, names: list[str]) -> int:
    entries = {canonical_name(entry.name): entry for entry in read_lock(lock)[1]}
    for wanted in names:
        if canonical_name(wanted) not in entries:
            sys.exit(f"{lock} pins no {wanted}")
        name, version, hashes = entries[canonical_name(wanted)]
        if not hashes:
            sys.exit(f"{lock}: {name}=={version} has no hash (make lock-hashes)")
        print(" ".join([f"{name}=={version}", *(f"--hash=sha256:{h}" for h in hashes)]))
    return 0


def cmd_resolvable(source: Path, out: Path) -> int:
    lines = []
    for line in source.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\s*(-c|--constraint|-r|--requirement)[\s=]+(\S+)\s*$", line)
        if match:
            target = (source.parent / match[2]).resolve()
            if match[1] in ("-c", "--constraint"):
                pins = out.parent / f"{out.name}.{target.name}.pins"
                pins.write_text("".join(f"{e.name}=={e.version}\n" for e in read_lock(target)[1]), encoding="utf-8")
                target = pins.resolve()
            line = f"{match[1]} {target}"
        lines.append(line)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("hash").add_argument("locks", nargs="+", type=Path)
    sub.add_parser("pins").add_argument("lock", type=Path)
    select = sub.add_parser("select")
    select.add_argument("lock", type=Path)
    select.add_argument("names", nargs="+")
    resolvable = sub.add_parser("resolvable")
    resolvable.add_argument("source", type=Path)
    resolvable.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "hash":
        return cmd_hash(args.locks)
    if args.command == "pins":
        return cmd_pins(args.lock)
    if args.command == "select":
        return cmd_select(args.lock, args.names)
    return cmd_resolvable(args.source, args.out)


if __name__ == "__main__":
    sys.exit(main())
