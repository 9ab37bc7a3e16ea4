# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Listening sockets and their processes: captured /proc/net/tcp and tcp6, a fake /proc tree around them."""

from __future__ import annotations

import os
import pathlib
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils import _sockets
from ansible_collections.dgxspark.cluster.plugins.module_utils._hostfs import HostFiles
from ansible_collections.dgxspark.cluster.plugins.module_utils._node_facts import CommandResult, Options, gather
from ansible_collections.dgxspark.cluster.plugins.module_utils._sockets import (
    TcpSocket,
    listening_facts,
    parse_net_tcp,
    socket_inode,
)
from ansible_collections.dgxspark.cluster.tests.unit.plugins.module_utils.node_facts_support import (
    FIXTURES,
    fake_docker_engine,
)

CAPTURED = FIXTURES / "ports"
VLLM_ID = "962259347e84a7e84abd0a7422096c3aab2a03d03c3900bcdb1327e89302c457"  # vllm_dsv41 in containers.json
WEBUI_ID = "5d0c1e0f6a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5"  # open-webui
# pid: (comm, cgroup, inodes of its socket descriptors)
PROCESSES: dict[int, tuple[str, str, tuple[int, ...]]] = {
    1: ("systemd", "0::/init.scope\n", ()),
    812: ("python3", "0::/system.slice/dgxspark-memguard.service\n", (18802,)),
    4242: ("vllm", f"0::/system.slice/docker-{VLLM_ID}.scope\n", (18800,)),
    4388: ("vllm", f"0::/system.slice/docker-{VLLM_ID}.scope\n", (18800, 9895)),  # a forked child, same socket
    5150: ("python3", "".join(f"{n}:{c}:/docker/{WEBUI_ID}\n" for n, c in ((12, "memory"), (4, "pids"))), (18803,)),
    6011: ("torchrun", "0::/user.slice/user-1000.slice/session-3.scope\n", (18801,)),
}


def proc_tree(root: pathlib.Path, processes: dict[int, tuple[str, str, tuple[int, ...]]] | None = None) -> pathlib.Path:
    processes = PROCESSES if processes is None else processes
    proc = root / "proc"
    (proc / "net").mkdir(parents=True)
    for name in ("tcp", "tcp6"):
        (proc / "net" / name).write_text((CAPTURED / f"proc-net-{name}").read_text())
    for pid, (comm, cgroup, inodes) in processes.items():
        (proc / str(pid) / "fd").mkdir(parents=True)
        (proc / str(pid) / "comm").write_text(comm + "\n")
        (proc / str(pid) / "cgroup").write_text(cgroup)
        os.symlink("/dev/null", proc / str(pid) / "fd" / "0")
        os.symlink("pipe:[9881]", proc / str(pid) / "fd" / "1")
        for fd, inode in enumerate(inodes, start=3):
            os.symlink(f"socket:[{inode}]", proc / str(pid) / "fd" / str(fd))
    return proc


def test_captured_tcp_lists_only_the_listening_sockets() -> None:
    assert parse_net_tcp((CAPTURED / "proc-net-tcp").read_text(), "ipv4", little_endian=True) == [
        TcpSocket("ipv4", "0.0.0.0", 2024, 639, 0),
        TcpSocket("ipv4", "127.0.0.1", 7391, 18802, 0),
        TcpSocket("ipv4", "0.0.0.0", 8000, 18800, 0),
    ]
    assert parse_net_tcp((CAPTURED / "proc-net-tcp6").read_text(), "ipv6", little_endian=True) == [
        TcpSocket("ipv6", "::1", 8001, 18803, 0),
        TcpSocket("ipv6", "::", 29501, 18801, 0),
        TcpSocket("ipv6", "::ffff:127.0.0.1", 8002, 18804, 0),
    ]


@pytest.mark.parametrize(
    "local,family,little_endian,address,port",
    [
        ("0100007F:1F40", "ipv4", True, "127.0.0.1", 8000),
        ("7F000001:1F40", "ipv4", False, "127.0.0.1", 8000),  # what a big-endian host prints
        ("0A6433C6:733D", "ipv4", True, "198.51.100.10", 29501),
        ("00000000000000000000000001000000:1F41", "ipv6", True, "::1", 8001),
        ("B80D0120000000000000000001000000:0050", "ipv6", True, "2001:db8::1", 80),
    ],
)
def test_addresses_in_the_hosts_byte_order(
    local: str, family: str, little_endian: bool, address: str, port: int
) -> None:
    line = (
        f"   0: {local} {'0' * len(local.split(':')[0])}:0000 0A 00000000:00000000 00:00000000 00000000  1000  0 77 1"
    )
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    assert parse_net_tcp(header + line, family, little_endian) == [TcpSocket(family, address, port, 77, 1000)]


@pytest.mark.parametrize(
    "line,family",
    [
        ("   0: 0100007F 00000000:0000 0A 0:0 00:0 0 0 0 77", "ipv4"),  # no port
        ("   0: 0100007F:1F40 00000000:0000 0A", "ipv4"),  # cut short
        ("   0: 0100007F:1F40 00000000:0000 0A 0:0 00:0 0 0 0 seventy", "ipv4"),  # inode not a number
        ("   0: 0100007F:1F40 00000000:0000 0A 0:0 00:0 0 0 0 77", "ipv6"),  # an IPv4 line in tcp6
    ],
)
def test_lines_that_do_not_fit_are_rejected(line: str, family: str) -> None:
    with pytest.raises(ValueError, match="not a /proc/net/tcp"):
        parse_net_tcp("header\n" + line, family)


@pytest.mark.parametrize(
    "link,inode",
    [
        ("socket:[18800]", 18800),
        ("pipe:[9881]", None),
        ("/dev/null", None),
        ("socket:[]", None),
        ("anon_inode:[x]", None),
    ],
)
def test_socket_inode(link: str, inode: int | None) -> None:
    assert socket_inode(link) == inode


def test_the_asked_ports_with_their_processes(tmp_path: pathlib.Path) -> None:
    problems: list[dict[str, str]] = []
    facts = listening_facts(HostFiles(problems), str(proc_tree(tmp_path)), [29501, 8000, 8000])
    assert problems == []
    assert facts == {
        "asked": [8000, 29501],
        "unreadable_processes": 0,
        "listening": [
            {
                "port": 8000,
                "family": "ipv4",
                "address": "0.0.0.0",
                "inode": 18800,
                "uid": 0,
                "pids": [4242, 4388],
                "pid": 4242,
                "comm": "vllm",
                "container": VLLM_ID,
            },
            {
                "port": 29501,
                "family": "ipv6",
                "address": "::",
                "inode": 18801,
                "uid": 0,
                "pids": [6011],
                "pid": 6011,
                "comm": "torchrun",
                "container": None,
            },
        ],
    }


def test_every_port_when_none_is_asked(tmp_path: pathlib.Path) -> None:
    facts = listening_facts(HostFiles([]), str(proc_tree(tmp_path)), [])
    assert facts["asked"] is None
    assert [(e["port"], e["family"], e["pid"], e["comm"], e["container"]) for e in facts["listening"]] == [
        (2024, "ipv4", None, None, None),  # the build machine's own process: not in the tree
        (7391, "ipv4", 812, "python3", None),
        (8000, "ipv4", 4242, "vllm", VLLM_ID),
        (8001, "ipv6", 5150, "python3", WEBUI_ID),  # cgroup v1 lines
        (8002, "ipv6", None, None, None),
        (29501, "ipv6", 6011, "torchrun", None),
    ]


def test_free_ports_cost_no_walk_over_the_processes(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proc = proc_tree(tmp_path)
    listed: list[str] = []
    real = os.listdir

    def counting(path: Any) -> list[str]:
        listed.append(str(path))
        return real(path)

    monkeypatch.setattr(_sockets.os, "listdir", counting)
    facts = listening_facts(HostFiles([]), str(proc), [8080, 29500])
    assert facts["listening"] == [] and listed == []
    listening_facts(HostFiles([]), str(proc), [8000])
    assert sum(path.endswith("/fd") for path in listed) == len(PROCESSES)


def test_processes_that_cannot_be_read_are_counted(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without root another user's /proc/<pid>/fd refuses to list: the socket's holder stays unknown."""
    proc = proc_tree(tmp_path)
    real = os.listdir

    def refusing(path: Any) -> list[str]:
        if str(path).endswith(("/6011/fd", "/1/fd")):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(_sockets.os, "listdir", refusing)
    facts = listening_facts(HostFiles([]), str(proc), [29501])
    assert facts["unreadable_processes"] == 2
    assert (facts["listening"][0]["pid"], facts["listening"][0]["pids"]) == (None, [])


def test_a_process_that_ends_during_the_walk_is_skipped(tmp_path: pathlib.Path) -> None:
    proc = proc_tree(tmp_path, {**PROCESSES, 7000: ("gone", "0::/\n", ())})
    (proc / "7000" / "fd").rename(proc / "7000" / "fd-gone")  # /proc/7000 without fd: the process exited
    facts = listening_facts(HostFiles([]), str(proc), [8000])
    assert facts["unreadable_processes"] == 0 and facts["listening"][0]["pids"] == [4242, 4388]


def test_an_unreadable_table_is_a_problem(tmp_path: pathlib.Path) -> None:
    proc = proc_tree(tmp_path)
    (proc / "net" / "tcp6").write_text("header\n   0: 0100007F:1F40 00000000:0000 0A 0:0 00:0 0 0 0 77\n")
    problems: list[dict[str, str]] = []
    facts = listening_facts(HostFiles(problems), str(proc), [8000, 29501])
    assert [e["port"] for e in facts["listening"]] == [8000]  # tcp still read
    assert [(p["section"], os.path.basename(p["source"])) for p in problems] == [("ports", "tcp6")]


def test_node_facts_names_the_container_from_the_docker_section(tmp_path: pathlib.Path) -> None:
    proc = proc_tree(tmp_path)
    with fake_docker_engine() as (path, _requests):
        node = gather(
            Options(
                sections=("docker", "ports"), proc_root=str(proc), docker_host=f"unix://{path}", ports=(8000, 8001)
            ),
            lambda argv: CommandResult(1, "", "no tools here"),
        )
    assert node["problems"] == []
    assert [(e["port"], e["comm"], e["container_name"]) for e in node["ports"]["listening"]] == [
        (8000, "vllm", "vllm_dsv41"),
        (8001, "python3", "open-webui"),
    ]
