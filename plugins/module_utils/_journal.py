# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot's journal on a node: what a boot paused, armed and started there, so that a boot whose controller died
(an AWX job cancelled, Ctrl-C, a lost connection) can be found and undone by the next boot, ``stop.yml`` or
``recover.yml``.

``node_phase`` writes it when it pauses the node's helpers (before it stops any), and removes it once a later
``node_phase`` resumed them (the boot's steady phase, its undo, a stop) with every step done. A journal that is
still there when no boot runs is an interrupted boot's. One JSON file per node, 0600 in a 0700 directory, written
atomically (a temporary file renamed). No Ansible imports.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.module_utils._files import write_private_json

DEFAULT_PATH = "/var/lib/dgxspark-cluster/boot-journal.json"


def read(path: str) -> tuple[dict[str, Any] | None, str | None]:
    """The journal (None when there is none), and why it could not be read (None when it could)."""
    try:
        with open(path, encoding="utf-8") as handle:
            entry = json.load(handle)
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as error:
        return None, f"{path}: {getattr(error, 'strerror', None) or error}"
    if not isinstance(entry, dict):
        return None, f"{path}: a journal is a JSON object, found {type(entry).__name__}"
    return entry, None


def helpers(entry: dict[str, Any] | None) -> list[str]:
    """The helper services the journal says were paused."""
    found = (entry or {}).get("helpers")
    return [str(unit) for unit in found] if isinstance(found, list) else []


def opened(
    previous: dict[str, Any] | None, now: str, paused: list[str], guard_phase: str | None, rank: str | None, by: str
) -> dict[str, Any]:
    """The journal of a pause: what this boot pauses, arms and starts; an earlier entry's helpers are kept (a boot
    after an interrupted one that was not undone still resumes what that one paused)."""
    kept = helpers(previous)
    return {
        "opened_at": (previous or {}).get("opened_at") or now,
        "updated_at": now,
        "by": by or (previous or {}).get("by") or "",
        "helpers": kept + [unit for unit in paused if unit not in kept],
        "guard_phase": guard_phase,
        "rank": rank,
    }


def write(path: str, entry: dict[str, Any]) -> None:
    write_private_json(path, entry)


def close(path: str) -> bool:
    """Remove the journal; whether there was one."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def said(journal: dict[str, Any]) -> str:
    """What an open journal (node_facts' ``journal`` section) says the interrupted boot had changed, in a line."""
    if journal.get("error"):
        return f"a boot's journal that cannot be read ({journal['error']})"
    entry = journal.get("entry") or {}
    return (
        f"a boot interrupted after {entry.get('updated_at') or entry.get('opened_at') or '?'}"
        f" (by {entry.get('by') or '?'}) had paused {', '.join(helpers(entry)) or 'no helper'}, armed the memory"
        f" guard ({entry.get('guard_phase') or 'not switched'})"
        + (f" and started {entry['rank']}" if entry.get("rank") else "")
    )


def facts(path: str = DEFAULT_PATH) -> dict[str, Any]:
    """node_facts' ``journal`` section: whether a boot's journal is open on the node, and what it says."""
    entry, error = read(path)
    return {"path": path, "open": entry is not None or error is not None, "entry": entry, "error": error}
