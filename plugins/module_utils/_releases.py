# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Releases: what served, kept on the head so that the last good setup stays addressable (seed 000, "Rollback
discipline": every profile change keeps its predecessor, with a one-command revert; changes are promoted only
after a comparison run, never in place).

A release is one JSON file on the head, ``<directory>/<id>.json`` (0600 in a 0700 directory, owned by root):
the profile exactly as booted, the plan, each rank's spec hash, the hash of the profile's ``host`` section (the
memory guard's floors and graces, the helper services, the kernel: what serves beside the ranks), the
image ID on every node, when and by whom, the benchmark evidence that judged it, its state, and its history. States:

- ``candidate``: booted, not (yet) judged;
- ``promoted``: the one release that serves by default; at most one at a time;
- ``retired``: served once, replaced since.

Promoting a release retires every other promoted or candidate release. The *previous* promoted release is the
one promoted most recently before the current one (its history says when); a rollback goes to it, or, while a
candidate serves, to the promoted release. The images of the promoted release and of the previous one are
protected: the collection never removes them, and a preflight fails when one is missing from a node.

No Ansible imports: the ``release`` module and node_facts' ``releases`` section read and write through here.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any, Iterable, Mapping, Sequence

from ansible_collections.dgxspark.cluster.plugins.module_utils._files import write_private_json

DEFAULT_DIRECTORY = "/var/lib/dgxspark-cluster/releases"
SCHEMA_VERSION = 1
STATES = ("candidate", "promoted", "retired")
ID = re.compile(r"^r\d{8}T\d{6}Z-[0-9a-f]{12}$")
# What a record must hold (the rest is the history and the evidence).
REQUIRED = ("schema_version", "id", "state", "created", "by", "profile", "shape", "spec_sha256", "images", "image")


class ReleaseError(ValueError):
    """A release cannot be read, written or changed; the message says which and why."""


def release_id(created_utc: str, profile_sha256: str) -> str:
    """``r<YYYYmmddTHHMMSSZ>-<the profile's SHA-256, 12 digits>`` from an ISO 8601 UTC time."""
    stamp = re.sub(r"[-:]", "", created_utc.split(".")[0]).rstrip("Z") + "Z"
    ident = f"r{stamp}-{profile_sha256[:12]}"
    if not ID.match(ident):
        raise ReleaseError(f"cannot make a release id from {created_utc!r} and {profile_sha256!r}")
    return ident


# The host section's keys that only the preflight reads before a boot: a change to them changes nothing that
# serves, so it is not a release (a floor raised above what a serving node reports must not demand a promotion).
PREFLIGHT_ONLY_HOST_KEYS = ("min_mem_available_gib",)


def host_sha256(profile: Mapping[str, Any]) -> str:
    """The SHA-256 of the profile's ``host`` section as canonical JSON (keys sorted, no spaces), less the keys only
    the preflight reads (``PREFLIGHT_ONLY_HOST_KEYS``): what serves beside the ranks (the memory guard's settings,
    the helper services, the kernel). Two profiles whose ranks are the same, spec for spec, are the same release
    only when this is the same too."""
    section = profile.get("host") if isinstance(profile, Mapping) else None
    kept = {k: v for k, v in (section or {}).items() if k not in PREFLIGHT_ONLY_HOST_KEYS}
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_record(record: Any) -> dict[str, Any]:
    """``record`` when it is a well-formed release, else ReleaseError naming what is wrong."""
    if not isinstance(record, Mapping):
        raise ReleaseError(f"a release is a JSON object, found {type(record).__name__}")
    missing = [key for key in REQUIRED if key not in record]
    if missing:
        raise ReleaseError(f"release {record.get('id')!r} lacks {', '.join(missing)}")
    if not isinstance(record["id"], str) or not ID.match(record["id"]):
        raise ReleaseError(f"release id {record['id']!r} is not r<YYYYmmddTHHMMSSZ>-<12 hex digits>")
    if record["state"] not in STATES:
        raise ReleaseError(f"release {record['id']}: state {record['state']!r} is not one of {', '.join(STATES)}")
    if not isinstance(record["images"], Mapping) or not isinstance(record["spec_sha256"], Mapping):
        raise ReleaseError(f"release {record['id']}: images and spec_sha256 map each host to a value")
    return dict(record)


def read_all(directory: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Every release in ``directory``, oldest first, and a problem line for each file that is not one."""
    records: list[dict[str, Any]] = []
    problems: list[str] = []
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return [], []
    except OSError as error:
        return [], [f"{directory}: {error.strerror or error}"]
    for name in names:
        if not name.endswith(".json"):
            continue
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="utf-8") as handle:
                record = check_record(json.load(handle))
            if f"{record['id']}.json" != name:
                raise ReleaseError(f"holds release {record['id']}")
            records.append(record)
        except (OSError, ValueError) as error:
            problems.append(f"{path}: {error}")
    records.sort(key=lambda r: (str(r["created"]), r["id"]))
    return records, problems


def promoted(records: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return next((r for r in reversed(records) if r["state"] == "promoted"), None)


def _last_promotion(record: Mapping[str, Any]) -> str:
    times = [str(e.get("at", "")) for e in record.get("history") or [] if e.get("event") == "promoted"]
    return max(times) if times else ""


def previous(records: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The release promoted most recently before the current promoted one (None when there is none)."""
    current = promoted(records)
    others = [r for r in records if r is not current and _last_promotion(r)]
    return max(others, key=_last_promotion) if others else None


def serving(records: Sequence[Mapping[str, Any]], specs: Mapping[str, str]) -> Mapping[str, Any] | None:
    """The release whose every rank's spec is what runs (``specs``: host to the running spec label). Releases that
    differ in their host section alone run the same specs: the newest that is not retired is the one that serves
    (a candidate while it is judged, the promoted one after a rollback), else the newest."""
    matching = [
        record
        for record in records
        if record["spec_sha256"] and all(specs.get(host) == spec for host, spec in record["spec_sha256"].items())
    ]
    live = [record for record in matching if record["state"] != "retired"]
    return (live or matching)[-1] if matching else None


def rollback_target(records: Sequence[Mapping[str, Any]], specs: Mapping[str, str]) -> Mapping[str, Any] | None:
    """Where a rollback goes: the previous promoted release when the promoted one serves (or nothing serves);
    the promoted release while anything else serves (a candidate)."""
    current, now = promoted(records), serving(records, specs)
    if current is not None and now is not None and now["id"] != current["id"]:
        return current
    return previous(records)


def protected_images(records: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Release id to its image IDs, for the promoted release and the previous one: never removed."""
    out: dict[str, list[str]] = {}
    for record in (promoted(records), previous(records)):
        if record is not None:
            out[record["id"]] = sorted({str(i) for i in record["images"].values() if i})
    return out


def summary(record: Mapping[str, Any]) -> dict[str, Any]:
    """A release without its profile text and plan: what a listing shows."""
    events = record.get("history") or []
    return {
        "id": record["id"],
        "state": record["state"],
        "created": record["created"],
        "by": record["by"],
        "profile_sha256": (record.get("profile") or {}).get("sha256"),
        "profile_path": (record.get("profile") or {}).get("path"),
        "shape": record["shape"],
        "image": record["image"],
        "images": dict(record["images"]),
        "spec_sha256": dict(record["spec_sha256"]),
        # None for a release recorded before host sections were hashed
        "host_sha256": record.get("host_sha256"),
        "evidence": sorted((record.get("evidence") or {}).keys()),
        # where its benchmark run is kept on the controller that ran it (status.yml reads its figures)
        "bench": (record.get("evidence") or {}).get("bench"),
        "last_event": events[-1] if events else None,
    }


def without_text(record: Mapping[str, Any]) -> dict[str, Any]:
    """A release whole but for its profile's text and its plan: its evidence and history with it (what the
    benchmark's history across releases reads)."""
    kept = {key: value for key, value in record.items() if key != "plan"}
    kept["profile"] = {key: value for key, value in (record.get("profile") or {}).items() if key != "text"}
    return kept


def facts(directory: str = DEFAULT_DIRECTORY) -> dict[str, Any]:
    """What a preflight reads of the releases (node_facts' ``releases`` section): every release's summary, the
    promoted and previous ones, the protected images; ``present`` false when the directory does not exist."""
    records, problems = read_all(directory)
    current, before = promoted(records), previous(records)
    return {
        "directory": directory,
        "present": os.path.isdir(directory),
        "releases": [summary(r) for r in records],
        "promoted": current["id"] if current else None,
        "previous": before["id"] if before else None,
        "protected_images": protected_images(records),
        "problems": problems,
    }


def event(record: Mapping[str, Any], name: str, at: str, by: str, detail: str = "") -> dict[str, Any]:
    """``record`` with one more history entry."""
    entry = {"event": name, "at": at, "by": by}
    if detail:
        entry["detail"] = detail
    return {**record, "history": [*(record.get("history") or []), entry]}


def promote(
    records: Sequence[Mapping[str, Any]], ident: str, at: str, by: str, detail: str = ""
) -> list[dict[str, Any]]:
    """The records that change when ``ident`` is promoted: it becomes the promoted release; every other
    promoted or candidate release is retired. Empty when ``ident`` is promoted already and nothing else is."""
    target = next((r for r in records if r["id"] == ident), None)
    if target is None:
        raise ReleaseError(f"no release {ident} (known: {', '.join(r['id'] for r in records) or 'none'})")
    changed: list[dict[str, Any]] = []
    for record in records:
        if record["id"] == ident:
            if record["state"] != "promoted":
                changed.append(event({**record, "state": "promoted"}, "promoted", at, by, detail))
        elif record["state"] in ("promoted", "candidate"):
            changed.append(event({**record, "state": "retired"}, "retired", at, by, f"{ident} promoted"))
    return changed


def add_evidence(record: Mapping[str, Any], name: str, data: Any, at: str, by: str) -> dict[str, Any]:
    """``record`` with ``data`` kept under ``evidence[name]`` (a benchmark run, a comparison's verdict)."""
    evidence = {**(record.get("evidence") or {}), name: data}
    return event({**record, "evidence": evidence}, "evidence", at, by, name)


def write(directory: str, record: Mapping[str, Any], exclusive: bool) -> str:
    """Write ``record`` as ``<directory>/<id>.json``: the directory 0700, the file 0600, atomically (a temporary
    file renamed). ``exclusive``: a release of that id must not exist yet."""
    record = check_record(record)
    path = os.path.join(directory, f"{record['id']}.json")
    if exclusive and os.path.exists(path):
        raise ReleaseError(f"release {record['id']} exists already ({path})")
    write_private_json(path, record)
    return path


def find(records: Iterable[Mapping[str, Any]], ident: str) -> Mapping[str, Any]:
    for record in records:
        if record["id"] == ident:
            return record
    raise ReleaseError(f"no release {ident}")
