# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What NCCL checks when a multi-node rank creates its communicator, on the simulated node.

Only the failures that the environment alone decides, with NCCL's own wording:

- ``NCCL_SOCKET_IFNAME`` (and ``GLOO_SOCKET_IFNAME``) must match an interface of this host
  (``/sys/class/net``); NCCL's syntax: a comma-separated list of name prefixes, ``=name`` for an
  exact name, a leading ``^`` to exclude instead. No match: "Bootstrap : no socket interface found".
- ``NCCL_NET=IB`` needs an RDMA device (``/sys/class/infiniband``); the simulated nodes have none, so
  a profile that forces IB there fails as it would on a host without RoCE:
  "NET/IB : No device found." then "Failed to initialize any NET plugin".

Set ``SIM_ENGINE_NCCL_CHECKS=0`` to skip these checks.
"""

from __future__ import annotations

import os
import socket
import threading

NCCL_VERSION = "2.30.3"


def _interfaces(root: str) -> list[str]:
    try:
        return sorted(os.listdir(root))
    except OSError:
        return []


def matches(spec: str, names: list[str]) -> list[str]:
    """The interfaces NCCL would consider for an ``NCCL_SOCKET_IFNAME`` value."""
    spec = spec.strip()
    exclude = spec.startswith("^")
    if exclude:
        spec = spec[1:]
    exact = spec.startswith("=")
    if exact:
        spec = spec[1:]
    wanted = [w for w in spec.split(",") if w]

    def hit(name: str) -> bool:
        return any((name == w) if exact else name.startswith(w) for w in wanted)

    return [n for n in names if hit(n) != exclude]


def _prefix() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_native_id()} [0]"


def check(env=None, net_root: str = "/sys/class/net", ib_root: str = "/sys/class/infiniband") -> str | None:
    """The error a rank prints (then exits 1) when its NCCL environment cannot work here, or None."""
    env = os.environ if env is None else env
    if env.get("SIM_ENGINE_NCCL_CHECKS", "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    names = _interfaces(net_root)
    for var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        spec = env.get(var)
        if spec and names and not matches(spec, names):
            if var == "GLOO_SOCKET_IFNAME":
                return (
                    f"RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] "
                    f"ifa != nullptr. Unable to find address for: {spec}"
                )
            return (
                f"{_prefix()} bootstrap.cc:101 NCCL WARN Bootstrap : no socket interface found\n"
                f"torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
                f"ProcessGroupNCCL.cpp:3356, internal error - please report this issue to the NCCL developers, "
                f"NCCL version {NCCL_VERSION}\n"
                "ncclInternalError: Internal check failed.\nLast error:\nBootstrap : no socket interface found\n"
                f"vllm-sim: NCCL_SOCKET_IFNAME={spec} matches none of this host's interfaces: {', '.join(names)}"
            )
    if env.get("NCCL_NET", "").strip().upper() == "IB" and not _interfaces(ib_root):
        return (
            f"{_prefix()} net_ib.cc:733 NCCL WARN NET/IB : No device found.\n"
            f"{_prefix()} net.cc:1041 NCCL WARN Failed to initialize any NET plugin\n"
            f"torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
            f"ProcessGroupNCCL.cpp:3356, unhandled system error (run with NCCL_DEBUG=INFO for details), "
            f"NCCL version {NCCL_VERSION}\n"
            "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n"
            "Last error:\nFailed to initialize any NET plugin\n"
            "vllm-sim: NCCL_NET=IB but this host has no RDMA device (/sys/class/infiniband is empty)"
        )
    return None
