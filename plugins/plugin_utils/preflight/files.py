# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of a file a role writes on a node, run there before the file is installed (the ``validate`` of its
``copy`` task), where the node has no parser of its own that only reads.

    python3 -c "<this file's source>" KIND FILE

exits 0 when FILE holds only what KIND allows, else 1, naming the first line that does not (on stderr). The
``dgxspark.cluster.file_check`` filter makes that command from this very source; the unit tests import the same
functions. So the source is the program: standard library only, no Ansible import, no percent sign (Ansible
puts the file's path into a ``validate`` command with Python's percent operator) and no Jinja delimiter.

Kinds:

- ``networkd``: a systemd-networkd ``.network`` file as the fabric role renders one. systemd has no command that
  reads a ``.network`` file and changes nothing (``systemd-analyze verify`` reads units only; networkd parses
  its files when it reloads them, logs what it ignores, and goes on): so the sections, the keys of each and the
  form of each value are checked here. One ``[Match]`` with one ``Name=`` on the interface-name allow-list.
- ``sysctl-fabric``, ``sysctl-kernel``: a ``sysctl.d`` file holding only blank lines, comments and
  ``key = value`` lines whose key is on the role's list and whose value is a number (``sysctl -p`` would read
  it, but it applies it too).

Also the one definition of :data:`IFNAME`, the interface-name allow-list (``_schema_v2`` takes it from here).
"""

from __future__ import annotations

import functools
import ipaddress
import re
import sys
from collections.abc import Callable, Iterator

# an interface name lands in netplan YAML, networkd files and sysctl keys: Linux's IFNAMSIZ (at most 15
# characters), starting with a letter, digit or _ (no - * or quote), then letters, digits, _ and - (no dot:
# a sysctl key splits on it; no = ; / : or control byte)
IFNAME = r"[A-Za-z0-9_][A-Za-z0-9_-]{0,14}"

BOOLEAN = ("yes", "no", "true", "false", "on", "off", "1", "0")


def _boolean(value: str) -> bool:
    return value in BOOLEAN


def _mtu(value: str) -> bool:
    return value.isdigit() and 68 <= int(value) <= 65535


def _parses(parse: Callable[[str], object]) -> Callable[[str], bool]:
    """A check that ``parse`` takes the value (raises no ValueError)."""

    def check(value: str) -> bool:
        try:
            parse(value)
            return True
        except ValueError:
            return False

    return check


_interface_address = _parses(ipaddress.ip_interface)
_network = _parses(functools.partial(ipaddress.ip_network, strict=False))
_address = _parses(ipaddress.ip_address)


# section -> key -> what its value must be: what the fabric role renders (plugin_utils/plan/fabric.py, render_networkd)
NETWORKD = {
    "Match": {"Name": lambda value: re.fullmatch(IFNAME, value) is not None},
    "Link": {"MTUBytes": _mtu, "RequiredForOnline": _boolean},
    "Network": {
        "ConfigureWithoutCarrier": _boolean,
        "LinkLocalAddressing": lambda value: value in ("yes", "no", "ipv4", "ipv6"),
        "IPForward": _boolean,
    },
    "Address": {"Address": _interface_address, "Peer": _interface_address},
    "Route": {"Destination": _network, "Gateway": _address, "GatewayOnLink": _boolean},
}

# role -> the sysctl keys its drop-in may set (each a full match), with numbers for values
SYSCTL_KEYS = {
    "fabric": (rf"net\.ipv4\.conf\.{IFNAME}\.rp_filter", r"net\.ipv4\.ip_forward"),
    "kernel": (r"fs\.nr_open",),
}


def _plain(number: int, line: str) -> str | None:
    """Why a line cannot be in a checked file at all (a control byte, a continuation), or None."""
    if any(ord(char) < 32 or ord(char) == 127 for char in line.replace("\t", " ")):
        return f"line {number}: holds a control character"
    if line.rstrip().endswith("\\"):
        return f"line {number}: continues on the next line"
    return None


def _content_lines(text: str, problems: list[str]) -> Iterator[tuple[int, str]]:
    """Each line of ``text`` that says something (not blank, not a comment), stripped, with its number; a line
    ``_plain`` refuses goes into ``problems`` instead."""
    for number, line in enumerate(text.split("\n"), 1):
        plain = _plain(number, line)
        if plain:
            problems.append(plain)
        elif line.strip() and line.strip()[0] not in "#;":
            yield number, line.strip()


def networkd_problems(text: str) -> list[str]:
    """What in ``text`` (a ``.network`` file) is not on the list; empty when all of it is."""
    problems: list[str] = []
    section = None
    names: list[str] = []
    matches = 0
    for number, stripped in _content_lines(text, problems):
        if stripped.startswith("["):
            section = stripped[1:-1] if stripped.endswith("]") else None
            if section not in NETWORKD:
                problems.append(f"line {number}: {stripped!r} is not a section a fabric port's file has")
            matches += section == "Match"
            continue
        key, equals, value = stripped.partition("=")
        key, value = key.strip(), value.strip()
        if not equals or section is None:
            problems.append(f"line {number}: {stripped!r} is not Key=value in a section")
        elif key not in NETWORKD.get(section, {}):
            problems.append(f"line {number}: {key!r} is not a key of [{section}] here")
        elif not NETWORKD[section][key](value):
            problems.append(f"line {number}: {key}={value!r} is not a value {key} takes here")
        elif key == "Name":
            names.append(value)
    if matches != 1 or len(names) != 1:
        problems.append(f"one [Match] with one Name= expected, found {matches} and {len(names)}")
    return problems


def sysctl_problems(text: str, role: str) -> list[str]:
    """What in ``text`` (a sysctl.d file) is not a comment or a ``key = number`` line of ``role``'s keys."""
    keys = SYSCTL_KEYS[role]
    problems: list[str] = []
    for number, stripped in _content_lines(text, problems):
        key, equals, value = stripped.partition("=")
        key, value = key.strip(), value.strip()
        if not equals:
            problems.append(f"line {number}: {stripped!r} is not key = value")
        elif not any(re.fullmatch(pattern, key) for pattern in keys):
            problems.append(f"line {number}: {key!r} is not a key the {role} role sets")
        elif not value.isdigit():
            problems.append(f"line {number}: {key} = {value!r} is not a number")
    return problems


def problems_of(kind: str, text: str) -> list[str]:
    """What is wrong with ``text`` as a file of ``kind`` (ValueError for a kind that is not one)."""
    if kind == "networkd":
        return networkd_problems(text)
    if kind.startswith("sysctl-") and kind[len("sysctl-") :] in SYSCTL_KEYS:
        return sysctl_problems(text, kind[len("sysctl-") :])
    raise ValueError(f"not a kind of file check: {kind!r}")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: KIND FILE (KIND: networkd, sysctl-fabric or sysctl-kernel)", file=sys.stderr)
        return 2
    kind, path = argv
    try:
        problems_of(kind, "")
    except ValueError as error:
        print(str(error), file=sys.stderr)
        return 2
    try:
        with open(path, encoding="utf-8", newline="") as handle:  # as written: a carriage return is a control byte
            text = handle.read()
    except (OSError, UnicodeDecodeError) as error:
        print(f"{path}: cannot be read: {error}", file=sys.stderr)
        return 1
    problems = problems_of(kind, text)
    for problem in problems:
        print(f"{path}: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
