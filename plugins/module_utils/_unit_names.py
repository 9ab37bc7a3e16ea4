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

No Ansible imports: standard library only, like the rest of module_utils.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

UNIT_NAME = r"[A-Za-z0-9_][A-Za-z0-9_:@.-]{0,240}\.(service|timer|socket)"
UNIT_NAME_HINT = "a unit name such as ollama.service (not starting with -)"
UNIT_NAME_RE = re.compile(UNIT_NAME)


def not_unit_names(names: Iterable[Any]) -> list[Any]:
    """The entries of ``names`` that are not unit names on the allow-list (:data:`UNIT_NAME`), in their order."""
    return [name for name in names if not isinstance(name, str) or UNIT_NAME_RE.fullmatch(name) is None]
