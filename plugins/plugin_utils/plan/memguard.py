# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The memory guard's configuration for one node (what the memguard role writes to its config.json).

Controller side, plain data in and out: the validated profile's ``host`` section (its defaults already
filled in by validation) and container name, the memguard role's settings (by their variable names),
this host's inventory name, every host of the play with its address and the guards' shared key. The
daemon (roles/memguard/files/dgxspark_memguard.py) checks the file again before it is kept; the checks
here name the role's variables and the profile's fields instead, and come before any node is touched.

The values that the role also writes into the guard's systemd unit and its shell wrapper (the container's
name, the node's Python, the install and configuration directories) must pass an allow-list here, so that
none can carry a quote, a space, a ``%`` specifier or a new line into either file. The guards listen on
this host's own address on the chosen network (never a wildcard) and take messages from the other hosts'
addresses on it only; the unit's watchdog is worked out from the longest the guard's loop can be busy.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import math
import os
import re
import shlex
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.converge import difference, report, sha256

GIB = 1024**3
POLICIES = ("stop-all", "local")
KEY_MIN_LENGTH = 16  # the daemon's own minimum for a peers' key
# Where the daemon keeps its things on the node (its own defaults; node_facts reads the first two).
STATE_PATH = "/run/dgxspark-memguard/state.json"
TRIP_PATH = "/var/lib/dgxspark-memguard/tripped.json"
LOG_PATH = "/var/log/dgxspark-memguard/decisions.jsonl"
CONTROL_SOCKET = "/run/dgxspark-memguard/control.sock"
# The decision log is rotated past this size, keeping this many older files.
LOG_MAX_BYTES = 16 * 1024 * 1024
LOG_BACKUPS = 3
# Where the guards reach each other: "management" is each host's ansible_host (its inventory name when it has
# none, as Ansible connects), "fabric" its dgxspark_fabric_address (the plan's fabric address).
NETWORKS = {"management": "ansible_host", "fabric": "dgxspark_fabric_address"}
# Docker's rule for a container's name; paths the unit and the wrapper hold: absolute, these characters only.
CONTAINER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{1,127}")
SAFE_PATH = re.compile(r"/[A-Za-z0-9_.+/-]*")
PATH_SETTINGS = ("memguard_python", "memguard_install_dir", "memguard_config_dir", "memguard_docker_socket")
# The longest the guard's loop is busy with one thing, and so the least its systemd watchdog may be: a trip
# looks the container up (10 s), stops it (the stop timeout + 10 s), kills it if the stop did not answer
# (10 s) and tells each peer (two tries of 1 s); with room to spare.
WATCHDOG_BASE_S = 40
# The profile's host fields a guard reads, by phase: floor (GiB), interval and grace (seconds).
PHASE_FIELDS: dict[str, tuple[str, str, str]] = {
    "startup": ("startup_memguard_gib", "startup_memguard_interval_seconds", "startup_memguard_grace_seconds"),
    "steady": ("memguard_gib", "memguard_interval_seconds", "memguard_grace_seconds"),
}
WAIT_FIELD = "startup_memguard_wait_seconds"
HOST_FIELDS = (*PHASE_FIELDS["startup"], *PHASE_FIELDS["steady"], WAIT_FIELD)
# The role's settings this function reads (memguard_settings changes HOST_FIELDS for this guard).
SETTINGS = (
    "memguard_settings",
    "memguard_container",
    "memguard_emergency_floor_gib",
    "memguard_psi_full_avg10_max",
    "memguard_stop_timeout_seconds",
    "memguard_cluster_policy",
    "memguard_peer_port",
    "memguard_peer_network",
    "memguard_docker_socket",
    "memguard_python",
    "memguard_install_dir",
    "memguard_config_dir",
)
# Settings a caller may leave out, with their defaults (a caller that predates them plans as before).
OPTIONAL_SETTINGS: dict[str, Any] = {"memguard_textfile_dir": ""}


class MemguardConfigError(ValueError):
    """The settings cannot make a configuration; the message names every problem."""


def _number(value: Any) -> int | float | None:
    """``value`` when it is a finite number (kept as given: an int stays an int in the file), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value


def memguard_config(
    host_section: Mapping[str, Any],
    container_name: str,
    settings: Mapping[str, Any],
    host: str,
    peers: Mapping[str, Any],
    key: str | None,
) -> dict[str, Any]:
    """This host's guard configuration.

    ``settings`` holds the role's variables of :data:`SETTINGS` by name. ``peers`` maps every host of the
    play, this one included, to its address on ``memguard_peer_network`` (``ansible_host``, where empty or
    null means the inventory name, as Ansible connects; or ``dgxspark_fabric_address``, which every host
    must have). This host's address is where its guard listens (never a wildcard); the others' are where it
    sends a trip and the only ones it takes one from. With ``memguard_cluster_policy: local`` there are
    no peers and no listener. ``key`` is the guards'
    shared key, or None when there is none yet (``--check`` before the first run created it): the
    configuration then has an empty key and must not be written."""
    problems: list[str] = []
    missing = [name for name in SETTINGS if name not in settings]
    if missing:
        raise MemguardConfigError(f"missing role settings: {', '.join(missing)}")
    settings = {**OPTIONAL_SETTINGS, **settings}
    changes = settings["memguard_settings"] or {}
    if not isinstance(changes, Mapping):
        raise MemguardConfigError(f"memguard_settings: expected a mapping of host fields, found {changes!r}")
    unknown = sorted(set(changes) - set(HOST_FIELDS))
    if unknown:
        problems.append(f"memguard_settings: unknown field(s) {', '.join(unknown)} (known: {', '.join(HOST_FIELDS)})")
    merged = {**host_section, **changes}

    def field(name: str, minimum_exclusive: bool = True) -> int | float:
        value = _number(merged.get(name))
        where = f"memguard_settings.{name}" if name in changes else f"the profile's host.{name}"
        if value is None or value < 0 or (minimum_exclusive and value == 0):
            expected = "a positive number" if minimum_exclusive else "a number >= 0"
            problems.append(f"{where}: expected {expected}, found {merged.get(name)!r}")
            return 1.0
        return value

    phases = {}
    for phase, (floor, interval, grace) in PHASE_FIELDS.items():
        phases[phase] = {
            "floor_bytes": int(field(floor) * GIB),
            "interval_s": field(interval),
            "grace_s": field(grace, minimum_exclusive=False),
        }
    wait_s = field(WAIT_FIELD)

    def setting(name: str, positive: bool = True) -> int | float:
        value = _number(settings[name])
        if value is None or value < 0 or (positive and value == 0):
            problems.append(
                f"{name}: expected a {'positive' if positive else 'non-negative'} number, found {settings[name]!r}"
            )
            return 1.0
        return value

    emergency_gib = setting("memguard_emergency_floor_gib", positive=False)
    psi = setting("memguard_psi_full_avg10_max", positive=False)
    stop_timeout = setting("memguard_stop_timeout_seconds")
    port = settings["memguard_peer_port"]
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        problems.append(f"memguard_peer_port: expected a TCP port (1-65535), found {port!r}")
    policy = settings["memguard_cluster_policy"]
    if policy not in POLICIES:
        problems.append(f"memguard_cluster_policy: expected one of {', '.join(POLICIES)}, found {policy!r}")
    container = settings["memguard_container"] or container_name
    if not container or not isinstance(container, str):
        problems.append(
            f"memguard_container: no container to guard (the profile's container.name is {container_name!r})"
        )
    elif not CONTAINER_NAME.fullmatch(container):
        problems.append(
            f"memguard_container: expected a Docker container name ([A-Za-z0-9][A-Za-z0-9_.-]+, the name the unit "
            f"and the guard use), found {container!r}"
        )
    for name in PATH_SETTINGS:
        value = settings[name]
        if not isinstance(value, str) or not SAFE_PATH.fullmatch(value) or "/../" in f"{value}/":
            problems.append(
                f"{name}: expected an absolute path of letters, digits and _ . + - / only (it is written into the "
                f"guard's systemd unit and shell wrapper), found {value!r}"
            )
    textfile_dir = settings["memguard_textfile_dir"] or ""
    if textfile_dir and (
        not isinstance(textfile_dir, str) or not SAFE_PATH.fullmatch(textfile_dir) or "/../" in f"{textfile_dir}/"
    ):
        problems.append(
            "memguard_textfile_dir: expected empty (no metrics) or an absolute directory of letters, digits and "
            f"_ . + - / only (node_exporter's textfile directory), found {textfile_dir!r}"
        )
    network = settings["memguard_peer_network"]
    if network not in NETWORKS:
        problems.append(f"memguard_peer_network: expected one of {', '.join(NETWORKS)}, found {network!r}")
    emergency_bytes = int(emergency_gib * GIB)
    over = [phase for phase, values in phases.items() if emergency_bytes >= values["floor_bytes"]]
    if over:
        floors = ", ".join(f"{phases[p]['floor_bytes'] / GIB:g} GiB {p}" for p in PHASE_FIELDS)
        problems.append(
            f"memguard_emergency_floor_gib {emergency_gib:g} must be below both phases' floors ({floors}): "
            f"lower it, or raise {' and '.join(PHASE_FIELDS[p][0] for p in over)}"
        )
    stop_all = policy == "stop-all"
    addresses = _addresses({host: None, **peers}, network) if stop_all and network in NETWORKS else {}
    for name, address in sorted(addresses.items()):
        if address is None:
            problems.append(
                f"{name}: no {NETWORKS[str(network)]}, the address its guard uses with memguard_peer_network "
                f"{network} (set it, or choose the other network)"
            )
        elif name == host and _is_wildcard(address):
            problems.append(
                f"{NETWORKS[str(network)]} {address!r}: the guard listens on this host's own address only, never on "
                "every address (a wildcard)"
            )
    if stop_all and key is not None and len(key) < KEY_MIN_LENGTH:
        problems.append(
            f"memguard_peer_key: the guards' shared key needs at least {KEY_MIN_LENGTH} characters, "
            f"found {len(key)} (leave it empty to have one generated into memguard_peer_key_file)"
        )
    if problems:
        raise MemguardConfigError(f"{host}: {'; '.join(problems)}; nothing was changed")
    config = {
        "host": host,
        "container": container,
        "docker_socket": settings["memguard_docker_socket"],
        "stop_timeout_s": stop_timeout,
        "phases": phases,
        "startup_wait_s": wait_s,
        "emergency_floor_bytes": emergency_bytes,
        "psi_full_avg10_max": psi if psi > 0 else None,
        "cluster_policy": policy,
        "peer_listen": {"address": addresses[host], "port": port} if stop_all else None,
        "peers": [
            {"host": name, "address": address, "port": port}
            for name, address in sorted(addresses.items())
            if name != host
        ],
        "peer_key": key or "",
        "state_path": STATE_PATH,
        "trip_path": TRIP_PATH,
        "log_path": LOG_PATH,
        "log_max_bytes": LOG_MAX_BYTES,
        "log_backups": LOG_BACKUPS,
        "control_socket": CONTROL_SOCKET,
        "watchdog_s": watchdog_seconds(stop_timeout, len(addresses) - 1 if stop_all else 0),
    }
    if textfile_dir:  # only when asked for: a guard without metrics keeps the configuration it had
        config["textfile_dir"] = textfile_dir.rstrip("/") or "/"
    return config


def watchdog_seconds(stop_timeout_s: float, peer_count: int) -> int:
    """The unit's ``WatchdogSec``: more than the longest the guard's loop can be busy (a trip: lookup, stop,
    kill, and two tries per peer), so that only a guard that hangs is restarted."""
    return int(math.ceil(WATCHDOG_BASE_S + stop_timeout_s + 2 * max(peer_count, 0)))


def _addresses(peers: Mapping[str, Any], network: str) -> dict[str, str | None]:
    """Every host's address on ``network``, as text; None where a fabric address is missing (a management
    address falls back to the inventory name, as Ansible connects)."""
    found: dict[str, str | None] = {}
    for name, address in peers.items():
        if address in (None, "") or not isinstance(address, str):
            found[str(name)] = str(name) if network == "management" and address in (None, "") else None
        else:
            found[str(name)] = address.strip()
    return found


def _is_wildcard(address: str) -> bool:
    """Every spelling of "every address" (the guard's own check is the same): empty, ``*``, ``0.0.0.0``, ``::``,
    ``0:0:0:0:0:0:0:0``, IPv4-mapped ``::ffff:0.0.0.0`` or ``::ffff:0:0``, and the short forms the C library
    reads as 0.0.0.0 (``0``, ``0.0``, ``0x0``)."""
    bare = address.strip().strip("[]").split("%", 1)[0].strip()
    if bare in ("", "*"):
        return True
    try:
        parsed = ipaddress.ip_address(bare)
    except ValueError:
        try:
            return socket.inet_aton(bare) == b"\0\0\0\0"
        except (OSError, ValueError):
            return False
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return parsed.ipv4_mapped.is_unspecified
    return parsed.is_unspecified


# --------------------------------------------------------------------------- the files the role writes
# The role writes its files from these texts (ansible.builtin.copy), and converges from facts by their SHA-256:
# the same text is what is compared and what is written. Every value in them passed the allow-list above
# (memguard_config), and the wrapper quotes its words for the shell as well.
MANAGED = "Ansible managed"
WRAPPER_PATH = "/usr/local/sbin/dgxspark-memguard"
UNIT_NAME = "dgxspark-memguard.service"
UNIT_PATH = f"/etc/systemd/system/{UNIT_NAME}"
SCRIPT_NAME = "dgxspark_memguard.py"


def file_paths(settings: Mapping[str, Any]) -> dict[str, str]:
    """Where the role writes each of the guard's files on a node, by what it is."""
    return {
        "script": f"{settings['memguard_install_dir']}/{SCRIPT_NAME}",
        "config": f"{settings['memguard_config_dir']}/config.json",
        "wrapper": WRAPPER_PATH,
        "unit": UNIT_PATH,
    }


def unit_text(config: Mapping[str, Any], settings: Mapping[str, Any]) -> str:
    """The guard's systemd unit for ``config`` (memguard_config's result, so its values are allow-listed)."""
    paths = file_paths(settings)
    return f"""# {MANAGED}
# Every value below passed the memguard_config filter's allow-list (a Docker container name; absolute paths of
# letters, digits and _ . + - / only): none needs systemd quoting, and none can carry a specifier or a new line.
[Unit]
Description=dgxspark memory guard: stops {config["container"]} before unified memory runs out
After=docker.service
Wants=docker.service
# A guard that keeps failing is not restarted forever: after 5 starts in 5 minutes the unit stays failed, and
# the boot's preflight reports a guard that is down.
StartLimitIntervalSec=300
StartLimitBurst=5

[Service]
# The guard says READY=1 after its first sample and WATCHDOG=1 at every sample after that (sd_notify over
# $NOTIFY_SOCKET); one whose loop stops for longer than WatchdogSec (more than a trip can take) is killed and
# restarted.
Type=notify
NotifyAccess=main
WatchdogSec={config["watchdog_s"]}
ExecStart={settings["memguard_python"]} {paths["script"]} --config {paths["config"]} run
# The guard itself may restart (its trip and phase survive that); it never restarts the container.
Restart=on-failure
RestartSec=2
# The guard is the last thing the kernel should kill, and it must get the CPU when memory is short.
OOMScoreAdjust=-1000
Nice=-5
MemoryMax=64M

[Install]
WantedBy=multi-user.target
"""


def wrapper_text(settings: Mapping[str, Any]) -> str:
    """The guard's command on the PATH: every word quoted for the shell (plain paths stay as they are)."""
    paths = file_paths(settings)
    words = " ".join(shlex.quote(word) for word in (settings["memguard_python"], paths["script"]))
    return (
        "#!/bin/sh\n"
        f"# {MANAGED}\n"
        "# The memory guard's command (status, phase, clear, trip, check); the daemon itself runs under systemd.\n"
        f'exec {words} --config {shlex.quote(paths["config"])} "$@"\n'
    )


def config_text(config: Mapping[str, Any]) -> str:
    """config.json as written: sorted keys, indented, a final new line (the SHA-256 compared is of this)."""
    return json.dumps(config, indent=4, sort_keys=True, separators=(",", ": "), ensure_ascii=False) + "\n"


def expectation(
    config: Mapping[str, Any], settings: Mapping[str, Any], script_sha256: str
) -> tuple[dict[str, str], dict[str, Any]]:
    """The texts the role writes (config, wrapper, unit) and what a node must have to match: every file of the
    guard by SHA-256 (the daemon's own script by ``script_sha256``) and its unit active and enabled."""
    texts = {"config": config_text(config), "wrapper": wrapper_text(settings), "unit": unit_text(config, settings)}
    paths = file_paths(settings)
    files = {paths["script"]: script_sha256, **{paths[what]: sha256(text) for what, text in texts.items()}}
    return texts, {"files": files, "units": [UNIT_NAME]}


def script_sha256() -> str:
    """The SHA-256 of the daemon the role installs: the collection's own ``roles/memguard/files`` copy."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, os.pardir, os.pardir, os.pardir, "roles", "memguard", "files", SCRIPT_NAME)
    with open(path, "rb") as script:
        return hashlib.sha256(script.read()).hexdigest()


def read_key(path: str) -> str:
    """The peers' key in a file ansible.builtin.password wrote (its text, then `` salt=...`` when it has one)."""
    with open(path, encoding="utf-8") as handle:
        return handle.read().rstrip("\n").split(" salt=")[0]


def key_if_any(key: str, key_file: str) -> str | None:
    """The peers' key: ``key`` when given, else the one in ``key_file``; None when there is none yet (never made)."""
    if key:
        return key
    try:
        return read_key(key_file)
    except FileNotFoundError:
        return None


def peers_of(hosts: Sequence[str], hostvars: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, str]:
    """Every host's address on ``memguard_peer_network`` (:data:`NETWORKS`), by inventory name ("" when unset)."""
    attribute = NETWORKS.get(str(settings["memguard_peer_network"]), "ansible_host")
    return {name: (hostvars[name].get(attribute) if name in hostvars else None) or "" for name in hosts}


def differences_by_host(
    hosts: Sequence[str],
    hostvars: Mapping[str, Any],
    settings: Mapping[str, Any],
    host_section: Mapping[str, Any],
    container_name: str,
    key: str | None,
    facts_by_host: Mapping[str, Any],
    script_sha: str,
) -> dict[str, list[str]]:
    """What the role would change on each of ``hosts``, from each one's node_facts (``files``, ``services``): every
    node's guard planned at once on the controller. ``settings`` are the role's (its vars/main.yml
    ``memguard_plan_settings``), templated for one host; a host's own inventory values of them win for its guard.
    The peers are every host's address on ``memguard_peer_network``."""
    peers = peers_of(hosts, hostvars, settings)
    differences = {}
    for name in hosts:
        own = hostvars.get(name) or {}
        mine = {**settings, **{k: own[k] for k in (*SETTINGS, *OPTIONAL_SETTINGS) if k in own}}
        config = memguard_config(host_section, container_name, mine, name, peers, key)
        differences[name] = difference(facts_by_host.get(name) or {}, expectation(config, mine, script_sha)[1])
    return differences


def difference_report(host: str, planned: Mapping[str, Any], key_file: str, check_mode: bool) -> list[str]:
    """What the memguard role says it changes on a node (or would change, in check mode): its ``memguard_plan``
    answer's ``difference``, and in check mode without the peer key, that the configuration compared has none."""
    notes = []
    if planned.get("key_missing"):
        notes.append(
            f"(check mode: {key_file} does not exist yet and is not created now; a real run creates it, so the "
            "configuration compared has no key)"
        )
    return report(host, "memory guard", planned.get("difference") or [], check_mode, notes)


GIB = 1024**3


def status_line(state: Mapping[str, Any] | None, status: Mapping[str, Any]) -> str:
    """``memory guard: ...``: what ``dgxspark-memguard status`` said of the guard (its ``state``: the phase, a trip,
    the last MemAvailable sample, the trips since install, its own health's problems), or why it did not answer
    (``status``, the command's answer: its stderr)."""
    if state is None:
        return f"memory guard: not answering ({status.get('stderr', 'not installed yet')})"
    tripped = state.get("tripped")
    trip = f", TRIPPED: {tripped.get('reason')}" if tripped else ", not tripped"
    available = ((state.get("last_sample") or {}).get("mem_available") or 0) / GIB
    health = state.get("health") or {}
    problems = (
        "" if health.get("ok", True) else "; PROBLEMS: " + "; ".join(str(p) for p in health.get("problems") or [])
    )
    return (
        f"memory guard: phase {state.get('phase')}{trip}; MemAvailable {round(available, 1)} GiB; "
        f"{state.get('trips')} trip(s) since install{problems}"
    )
