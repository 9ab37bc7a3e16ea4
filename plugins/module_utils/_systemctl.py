# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The state of several systemd units from one ``systemctl show`` call.

``systemctl show --property=A,B -- u1 u2`` prints each unit's properties as ``Key=value`` lines, one block
per unit in the order asked, blocks separated by an empty line (systemctl(1)). A unit systemd does not know
still gets a block (``LoadState=not-found``, ``ActiveState=inactive``, empty ``UnitFileState``).
Values are kept as systemctl prints them (``NRestarts=3`` is the string ``"3"``).
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

# systemd property -> fact name.
PROPERTIES: tuple[tuple[str, str], ...] = (
    ("Id", "id"),
    ("LoadState", "load_state"),
    ("ActiveState", "active_state"),
    ("SubState", "sub_state"),
    ("UnitFileState", "unit_file_state"),
    # why the unit last stopped (success, exit-code, watchdog, start-limit-hit, ...) and how often systemd
    # restarted it: what tells a guard that crashed and is restarting from one that gave up
    ("Result", "result"),
    ("NRestarts", "restarts"),
)

UnitState = Dict[str, Optional[str]]


def show_argv(binary: str, units: Sequence[str]) -> list[str]:
    return [binary, "show", "--no-pager", "--property=" + ",".join(prop for prop, _fact in PROPERTIES), "--", *units]


def parse_show(text: str, units: Sequence[str]) -> dict[str, UnitState]:
    """Each unit's state (an empty value is null), keyed by the name asked for.

    Raises ``ValueError`` when the number of blocks is not the number of units, or a line is not
    ``Key=value``.
    """
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        key, sep, value = line.partition("=")
        if not sep or not key:
            raise ValueError(f"not a Key=value line: {line!r}")
        current[key] = value
    if current:
        blocks.append(current)
    if len(blocks) != len(units):
        raise ValueError(f"asked about {len(units)} unit(s), systemctl answered for {len(blocks)}")
    return {unit: {fact: (block.get(prop) or None) for prop, fact in PROPERTIES} for unit, block in zip(units, blocks)}
