# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which systemd unit names the collection hands to ``systemctl``: the one allow-list.

The profile's schema checks ``host.helper_services`` with :data:`UNIT_NAME` (``plugin_utils/profile/schema.py``
imports it from here), and ``node_phase`` checks the names it is given, and those a boot journal on the node
lists, with :func:`not_unit_names` before it calls ``systemctl``. Here, so node code can import it too.

A name is a unit name as systemd.unit(5) has them, narrowed to what a helper service is: letters, digits and
``_ : @ . -``, not starting with ``-`` or ``.`` (``systemctl`` would read ``-H.service`` as an option), ending in
``.service``, ``.timer`` or ``.socket``; no ``/`` (a path), no whitespace or control byte, no glob (``*``, ``?``,
``[``: ``systemctl stop`` would stop every unit it matches), at most 248 characters.

A helper is a unit the boot pauses: never one the node's own running depends on (:data:`NEVER_HELPERS`): the
connection's own services (ssh, sshd: pausing them cuts Ansible off), the container engine (docker, containerd: the
ranks), the memory guard (``dgxspark-memguard.service``: nothing would guard the node), systemd's own units
(``systemd-*``), D-Bus (systemctl itself talks through it) and the network's managers. :func:`refused_helpers` names
them, with the reason; the profile's checks and ``node_phase`` refuse them alike.

No Ansible imports: standard library only, like the rest of module_utils.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

UNIT_NAME = r"[A-Za-z0-9_][A-Za-z0-9_:@.-]{0,240}\.(service|timer|socket)"
UNIT_NAME_HINT = "a unit name such as ollama.service (not starting with -)"
UNIT_NAME_RE = re.compile(UNIT_NAME)


# Units a boot never pauses, by the name before the unit's type (ssh.service, ssh.socket, sshd@1.service alike), each
# with why. The guard's unit is plugin_utils/plan/memguard.py's UNIT_NAME (a unit test compares them).
NEVER_HELPERS = (
    (re.compile(r"sshd?(@.*)?"), "the connection's own service: pausing it cuts Ansible off the node"),
    (re.compile(r"(docker|containerd)(@.*)?"), "the container engine: the ranks run in it"),
    (re.compile(r"dgxspark-memguard"), "the memory guard: nothing would guard the node during the load"),
    (re.compile(r"systemd-.*"), "systemd's own unit: the node's logging, devices, network or time"),
    (re.compile(r"dbus(-broker)?"), "D-Bus: systemctl itself talks to systemd through it"),
    (re.compile(r"NetworkManager|networkd-dispatcher|netplan-.*"), "the node's network: the fabric and management"),
)


def refused_helper(name: Any) -> str:
    """Why ``name`` may not be a helper service (:data:`NEVER_HELPERS`); empty when it may."""
    if not isinstance(name, str):
        return ""
    stem = name.rsplit(".", 1)[0]
    for pattern, why in NEVER_HELPERS:
        if pattern.fullmatch(stem):
            return why
    return ""


def refused_helpers(names: Iterable[Any]) -> list[tuple[Any, str]]:
    """The entries of ``names`` a boot never pauses, each with the reason, in their order."""
    return [(name, refused_helper(name)) for name in names if refused_helper(name)]


def not_unit_names(names: Iterable[Any]) -> list[Any]:
    """The entries of ``names`` that are not unit names on the allow-list (:data:`UNIT_NAME`), in their order."""
    return [name for name in names if not isinstance(name, str) or UNIT_NAME_RE.fullmatch(name) is None]
