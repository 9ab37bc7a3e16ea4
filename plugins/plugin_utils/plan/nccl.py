# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NCCL environment for a shape, and the NCCL settings known to be wrong on GB10."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Collector
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.schema import TRANSPORTS

# GB10 has no NVLink, so no NVLink SHARP (seed 002 section 4.1).
GB10 = {"NCCL_NVLS_ENABLE": "0"}
# Seed 002 section 4.3 (its TP8 compose file), for every shape on GB10.
COMMON = {
    "NCCL_CUMEM_ENABLE": "0",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    "NCCL_DEBUG": "WARN",
}
# RoCE v2 over IPv4 on the ConnectX-7 ports (seed 002 section 4.3). NCCL_NET=IB makes NCCL fail
# loudly instead of falling back to TCP sockets when RDMA is not there.
ROCE = {
    "NCCL_NET": "IB",
    "NCCL_IB_DISABLE": "0",
    "NCCL_IB_ROCE_VERSION_NUM": "2",
    "NCCL_IB_ADDR_FAMILY": "AF_INET",
    "NCCL_IB_MERGE_NICS": "0",
    "NCCL_CROSS_NIC": "1",
}
# No RDMA (the simulated cluster, or a fabric without RoCE): TCP sockets only.
SOCKET = {"NCCL_NET": "Socket", "NCCL_IB_DISABLE": "1"}
# At 8 ranks the default 64 channels cost ~37 GB per rank; 8 channels and 1 MiB buffers bring it
# to ~11 GB (seed 002 section 4.1 and lesson 1).
MANY_RANKS = 8
# Seed 002's CPU rule, on seed 002's shapes only: its 8 ranks run with NCCL_IGNORE_CPU_AFFINITY=1 (section 4.3) and no
# CPU set; seed 000's 3 and 4 pin each rank with --cpuset-cpus, which NCCL_IGNORE_CPU_AFFINITY=1 would have NCCL's
# threads ignore. So a shape renders its own seed's rule (docs/seed-rules.md, "The seeds' CPU rules").
MANY_RANKS_ENV = {"NCCL_MAX_NCHANNELS": "8", "NCCL_BUFFSIZE": "1048576", "NCCL_IGNORE_CPU_AFFINITY": "1"}
MAX_CHANNELS_AT_8 = 8
MAX_BUFFSIZE_AT_8 = 1048576
# On a ring without a switch only neighbours are cabled; NCCL's tree algorithm would need links
# between non-neighbours, so the ring algorithm is pinned.
RING = {"NCCL_ALGO": "Ring"}


def topology_of(fabric: Mapping[str, Any]) -> str:
    """The cabling of a shape's fabric: explicit ``topology``, else what ``transport`` implies."""
    return str(fabric.get("topology") or TRANSPORTS.get(fabric["transport"], ""))


def nccl_environment(
    nodes: int,
    fabric: Mapping[str, Any],
    hca: Sequence[str] | None = None,
    socket_ifname: str | None = None,
    gid_index: int | None = None,
) -> dict[str, str]:
    """The NCCL environment the collection computes for a shape (before the profile's own overrides).

    ``hca``, ``socket_ifname`` and ``gid_index`` default to the shape's fabric settings; node facts
    pass what they discovered on the host.
    """
    net = fabric.get("nccl_net", "IB")
    env: dict[str, str] = {**GB10, **COMMON}
    env.update(ROCE if net == "IB" else SOCKET)
    if nodes >= MANY_RANKS:
        env.update(MANY_RANKS_ENV)
    if topology_of(fabric) == "ring":
        env.update(RING)
    devices = list(hca if hca is not None else fabric.get("hca") or [])
    if devices and net == "IB":
        env["NCCL_IB_HCA"] = "=" + ",".join(devices)  # '=': exactly these, not name prefixes
    ifname = socket_ifname if socket_ifname is not None else fabric.get("socket_ifname")
    if ifname:
        env["NCCL_SOCKET_IFNAME"] = ifname
        env["GLOO_SOCKET_IFNAME"] = ifname.lstrip("=^").split(",")[0]
    gid = gid_index if gid_index is not None else fabric.get("gid_index")
    if gid is not None and net == "IB":
        env["NCCL_IB_GID_INDEX"] = str(gid)
    return env


def _int(env: Mapping[str, str], name: str, where: str, out: Collector) -> int | None:
    if name not in env:
        return None
    try:
        return int(env[name])
    except (TypeError, ValueError):
        out.error(f"{where}.{name}", "not an integer", found=env[name], expected="an integer")
        return None


def check_nccl_environment(env: Mapping[str, str], nodes: int, net: str, where: str, out: Collector) -> None:
    """Report NCCL settings known to be wrong on GB10 or inconsistent with the shape."""
    nvls = env.get("NCCL_NVLS_ENABLE")
    if nvls is not None and nvls != "0":
        out.error(
            f"{where}.NCCL_NVLS_ENABLE",
            "NVLink SHARP cannot work on GB10 (no NVLink)",
            found=nvls,
            expected='"0"',
            hint="seed 002 section 4.1",
            check="nvls-off",
        )
    channels = _int(env, "NCCL_MAX_NCHANNELS", where, out)
    buffsize = _int(env, "NCCL_BUFFSIZE", where, out)
    minimum = _int(env, "NCCL_MIN_NCHANNELS", where, out)
    _int(env, "NCCL_IB_GID_INDEX", where, out)
    if nodes >= MANY_RANKS:
        for name, value, cap, why, hint, check in (
            (
                "NCCL_MAX_NCHANNELS",
                channels,
                MAX_CHANNELS_AT_8,
                "NCCL's channels must be capped: 64 channels cost ~37 GB per rank, 8 cost ~11 GB",
                "seed 002 section 4.1 and lesson 1",
                "nccl-channels-at-8-ranks",
            ),
            (
                "NCCL_BUFFSIZE",
                buffsize,
                MAX_BUFFSIZE_AT_8,
                "NCCL's buffers must be 1 MiB to fit",
                "seed 002 section 4.1",
                "nccl-buffsize-at-8-ranks",
            ),
        ):
            if value is None or value > cap:
                out.error(
                    f"{where}.{name}",
                    f"at {nodes} ranks {why}",
                    found=env.get(name),
                    expected=f"<= {cap}",
                    hint=hint,
                    check=check,
                )
    if minimum is not None and channels is not None and minimum > channels:
        out.error(f"{where}.NCCL_MIN_NCHANNELS", "above NCCL_MAX_NCHANNELS", found=minimum, expected=f"<= {channels}")
    _check_seed_values(env, net, nodes, where, out)
    disabled = env.get("NCCL_IB_DISABLE")
    if net == "IB" and disabled not in (None, "0"):
        out.error(
            f"{where}.NCCL_IB_DISABLE",
            "RDMA disabled while the shape's fabric.nccl_net is IB",
            found=disabled,
            expected='"0"',
            hint="set fabric.nccl_net to Socket for a fabric without RoCE",
        )
    chosen = env.get("NCCL_NET")
    if chosen is not None and chosen != net:
        out.error(f"{where}.NCCL_NET", "disagrees with the shape's fabric.nccl_net", found=chosen, expected=repr(net))
    ifname = env.get("NCCL_SOCKET_IFNAME", "")
    for name in ifname.lstrip("=^").split(","):
        if name == "lo" or name.startswith("docker"):
            out.error(
                f"{where}.NCCL_SOCKET_IFNAME",
                "a loopback or Docker bridge interface cannot reach the other nodes",
                found=ifname,
                expected="the fabric interfaces",
            )


# NCCL variables whose value the seeds fix, and why; an override the other way contradicts them: an error where the
# seed states a rule or the value breaks the fabric, a warning where the seed's compose file only sets it.
SEED_VALUES: tuple[tuple[str, str, bool, str, str, bool], ...] = (
    # (variable, value, only with RoCE, why, check, error)
    (
        "NCCL_IB_ROCE_VERSION_NUM",
        "2",
        True,
        "the fabric runs RoCE v2 (seed 000: 'NCCL runs RoCE v2 over that fabric only'; seed 002 section 4.3: "
        "'2' # RoCE v2); version 1 is not routable and uses another GID",
        "roce-v2",
        True,
    ),
    (
        "NCCL_CUMEM_ENABLE",
        "0",
        False,
        "seed 002 section 4.3 turns NCCL's cuMem allocations off ('0' # NCCL cumem off) on GB10's unified memory",
        "nccl-cumem-off",
        True,
    ),
    (
        "NCCL_IB_MERGE_NICS",
        "0",
        True,
        "seed 002 section 4.3 keeps the ConnectX-7 ports apart ('0' # No NIC merge), each its own path, "
        "with NCCL_CROSS_NIC=1",
        "nccl-no-nic-merge",
        True,
    ),
    (
        "NCCL_IB_ADDR_FAMILY",
        "AF_INET",
        True,
        "the fabric is IPv4 (seed 002 section 4.3: 'AF_INET' # IPv4; seed 000's private /24): with another family "
        "NCCL looks for RoCE GIDs of addresses the fabric ports do not have",
        "nccl-ipv4",
        True,
    ),
    (
        "NCCL_CROSS_NIC",
        "1",
        True,
        "seed 002 section 4.3 lets NCCL's rings cross NICs ('1' # Cross-NIC) beside NCCL_IB_MERGE_NICS=0",
        "nccl-cross-nic",
        False,
    ),
    (
        "TORCH_NCCL_ASYNC_ERROR_HANDLING",
        "1",
        False,
        "seed 002 section 4.3 sets it to '1': a failed or hung collective then ends the rank with an error; with 0 "
        "a rank whose peer died can wait for ever",
        "nccl-async-errors",
        False,
    ),
    (
        "NCCL_DEBUG",
        "WARN",
        False,
        "seed 002 section 4.3 runs NCCL_DEBUG 'WARN'; INFO and TRACE log every connection of every rank (keep them "
        "for a debugging boot)",
        "nccl-debug",
        False,
    ),
)
# Seed 002 section 4.3's CPU rule, where it holds: its 8 ranks.
CPU_AFFINITY = "NCCL_IGNORE_CPU_AFFINITY"


def _check_seed_values(env: Mapping[str, str], net: str, nodes: int, where: str, out: Collector) -> None:
    for name, value, roce_only, why, check, error in SEED_VALUES:
        found = env.get(name)
        if found is None or found == value or (roce_only and net != "IB"):
            continue
        if error:
            out.error(
                f"{where}.{name}", f"contradicts the seeds: {why}", found=found, expected=f'"{value}"', check=check
            )
        else:
            out.warn(
                f"{where}.{name}", f"differs from the seed: {why}", found=found, expected=f'"{value}"', check=check
            )
    affinity = env.get(CPU_AFFINITY)
    if nodes >= MANY_RANKS and affinity is not None and affinity != "1":
        out.warn(
            f"{where}.{CPU_AFFINITY}",
            "differs from the seed: seed 002 section 4.3 runs its 8 ranks with NCCL_IGNORE_CPU_AFFINITY '1' (Ignore "
            "CPU affinity) and pins no CPU set; seed 000's --cpuset-cpus rule is for its 3 and 4 nodes",
            found=affinity,
            expected='"1" (seed 002 section 4.3)',
            check="nccl-cpu-affinity",
        )
