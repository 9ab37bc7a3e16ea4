# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`docker run` options in a profile: parsed, checked against Docker's own list, and read for limits.

The option list is Docker CLI 28.2's `docker run --help` (the engine the simulated cluster runs);
a misspelt option is caught here instead of by `docker run` in the middle of a boot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# Long option -> takes a value. From `docker run --help`, Docker 28.2.2.
DOCKER_RUN_OPTIONS: dict[str, bool] = {
    **dict.fromkeys(
        (
            "--add-host --annotation --attach --blkio-weight --blkio-weight-device --cap-add --cap-drop "
            "--cgroup-parent --cgroupns --cidfile --cpu-count --cpu-percent --cpu-period --cpu-quota "
            "--cpu-rt-period --cpu-rt-runtime --cpu-shares --cpus --cpuset-cpus --cpuset-mems --detach-keys "
            "--device --device-cgroup-rule --device-read-bps --device-read-iops --device-write-bps "
            "--device-write-iops --dns --dns-option --dns-search --domainname --entrypoint --env --env-file "
            "--expose --gpus --group-add --health-cmd --health-interval --health-retries --health-start-interval "
            "--health-start-period --health-timeout --hostname --io-maxbandwidth --io-maxiops --ip --ip6 --ipc "
            "--isolation --kernel-memory --label --label-file --link --link-local-ip --log-driver --log-opt "
            "--mac-address --memory --memory-reservation --memory-swap --memory-swappiness --mount --name "
            "--network --network-alias --oom-score-adj --pid --pids-limit --platform --publish --pull "
            "--restart --runtime --security-opt --shm-size --stop-signal --stop-timeout --storage-opt "
            "--sysctl --tmpfs --ulimit --user --userns --uts --volume --volume-driver --volumes-from --workdir"
        ).split(),
        True,
    ),
    **dict.fromkeys(
        (
            "--detach --disable-content-trust --init --interactive --no-healthcheck --oom-kill-disable "
            "--privileged --publish-all --quiet --read-only --rm --sig-proxy --tty --use-api-socket"
        ).split(),
        False,
    ),
}
SHORT_OPTIONS = {
    "-a": "--attach",
    "-c": "--cpu-shares",
    "-d": "--detach",
    "-e": "--env",
    "-h": "--hostname",
    "-i": "--interactive",
    "-l": "--label",
    "-m": "--memory",
    "-p": "--publish",
    "-P": "--publish-all",
    "-q": "--quiet",
    "-t": "--tty",
    "-u": "--user",
    "-v": "--volume",
    "-w": "--workdir",
}

# Options the collection renders itself, or that break a managed rank.
RENDERED_BY_COLLECTION = {
    "--name": "set container.name",
    "--entrypoint": "set container.entrypoint",
    "--detach": "every rank is started detached already",
    "--env": "put variables in shapes.<shape>.environment, so the plan and the rank agreement see them",
    "--env-file": "put variables in shapes.<shape>.environment, so the plan and the rank agreement see them",
    "--label": "the collection labels every rank itself",
    "--rm": "a removed container takes its logs with it; the boot needs them to report a failure",
    "--interactive": "ranks run without a terminal under Ansible",
    "--tty": "ranks run without a terminal under Ansible",
}


@dataclass(frozen=True)
class DockerOption:
    name: str
    """The long option, e.g. ``--ulimit``; an unknown one is kept as written."""
    value: str | None
    index: int
    """Index of the option's first element in the argument list."""
    known: bool


def parse_docker_args(args: Sequence[str]) -> list[DockerOption]:
    """Split ``["--ulimit=memlock=-1:-1", "--ipc", "host", "-e", "A=1"]`` into options."""
    options: list[DockerOption] = []
    i = 0
    while i < len(args):
        start, item = i, args[i]
        name, sep, inline = item.partition("=") if item.startswith("--") else (item, "", "")
        name = SHORT_OPTIONS.get(name, name)
        takes_value = DOCKER_RUN_OPTIONS.get(name)
        value: str | None = inline if sep else None
        if takes_value and not sep and i + 1 < len(args):
            # Like Docker's own parser: a value option takes the next element, whatever it looks like.
            i += 1
            value = args[i]
        options.append(DockerOption(name, value, start, takes_value is not None))
        i += 1
    return options


@dataclass(frozen=True)
class Ulimit:
    soft: int
    hard: int
    """-1 means unlimited."""

    def as_dict(self) -> dict[str, int]:
        return {"soft": self.soft, "hard": self.hard}


def parse_ulimit(text: str) -> tuple[str, Ulimit]:
    """``memlock=-1:-1`` -> ("memlock", Ulimit(-1, -1)); ``nofile=1048576`` sets soft and hard alike."""
    name, sep, limits = text.partition("=")
    if not sep or not name:
        raise ValueError(f"'{text}' is not NAME=SOFT[:HARD]")
    soft_text, _sep, hard_text = limits.partition(":")
    try:
        soft = int(soft_text)
        hard = int(hard_text) if hard_text else soft
    except ValueError:
        raise ValueError(f"'{text}': limits must be integers (-1 for unlimited)") from None
    for value in (soft, hard):
        if value < -1:
            raise ValueError(f"'{text}': a limit below -1")
    if hard != -1 and (soft == -1 or soft > hard):
        raise ValueError(f"'{text}': the soft limit exceeds the hard limit")
    return name, Ulimit(soft, hard)


_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(text: str) -> int:
    """Docker's size syntax (``112g``, ``16g``, ``512m``) in bytes."""
    raw = text.strip().lower()
    number = raw.rstrip("bkmgt")
    unit = raw[len(number) :]
    unit = unit[:-1] if unit.endswith("b") and len(unit) == 2 else unit
    if unit not in _SIZE_UNITS or not number:
        raise ValueError(f"'{text}' is not a size such as 112g")
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"'{text}' is not a size such as 112g") from None
    return int(value * _SIZE_UNITS[unit])


def container_ulimits(args: Sequence[str]) -> dict[str, Ulimit]:
    """The ulimits ``--ulimit`` options give; later options win, as with Docker. Bad ones are skipped."""
    result: dict[str, Ulimit] = {}
    for option in parse_docker_args(args):
        if option.name == "--ulimit" and option.value is not None:
            try:
                name, limit = parse_ulimit(option.value)
            except ValueError:
                continue
            result[name] = limit
    return result


def option_values(args: Sequence[str], name: str) -> list[str]:
    return [o.value for o in parse_docker_args(args) if o.name == name and o.value is not None]
