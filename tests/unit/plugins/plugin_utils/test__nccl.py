# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Collector
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.nccl import check_nccl_environment, nccl_environment


@pytest.mark.parametrize(
    "nodes,transport,net,present,absent",
    [
        (
            3,
            "oneshot-direct",
            "IB",
            {"NCCL_NET": "IB", "NCCL_NVLS_ENABLE": "0", "NCCL_IB_ROCE_VERSION_NUM": "2", "NCCL_CROSS_NIC": "1"},
            ["NCCL_MAX_NCHANNELS", "NCCL_ALGO", "NCCL_IB_HCA"],
        ),
        (4, "oneshot-ring4", "IB", {"NCCL_ALGO": "Ring"}, ["NCCL_MAX_NCHANNELS"]),
        (8, "switch", "IB", {"NCCL_MAX_NCHANNELS": "8", "NCCL_BUFFSIZE": "1048576"}, ["NCCL_ALGO"]),
        (3, "oneshot-direct", "Socket", {"NCCL_NET": "Socket", "NCCL_IB_DISABLE": "1"}, ["NCCL_IB_ROCE_VERSION_NUM"]),
    ],
)
def test_environment_per_shape(
    nodes: int, transport: str, net: str, present: dict[str, str], absent: list[str]
) -> None:
    env = nccl_environment(nodes, {"transport": transport, "nccl_net": net})
    assert {k: env.get(k) for k in present} == present
    assert not set(absent) & set(env)


def test_discovered_devices() -> None:
    env = nccl_environment(
        3,
        {"transport": "oneshot-direct", "nccl_net": "IB"},
        hca=["rocep1s0f1", "roceP2p1s0f1"],
        socket_ifname="enp1s0f1np1,enP2p1s0f1np1",
        gid_index=3,
    )
    assert env["NCCL_IB_HCA"] == "=rocep1s0f1,roceP2p1s0f1"
    assert env["NCCL_SOCKET_IFNAME"] == "enp1s0f1np1,enP2p1s0f1np1"
    assert env["GLOO_SOCKET_IFNAME"] == "enp1s0f1np1"
    assert env["NCCL_IB_GID_INDEX"] == "3"


@pytest.mark.parametrize(
    "env,nodes,net,fragment",
    [
        ({"NCCL_NVLS_ENABLE": "1"}, 3, "IB", "no NVLink"),
        ({"NCCL_MAX_NCHANNELS": "64", "NCCL_BUFFSIZE": "1048576"}, 8, "IB", "channels must be capped"),
        ({"NCCL_BUFFSIZE": "4194304", "NCCL_MAX_NCHANNELS": "8"}, 8, "IB", "buffers must be 1 MiB"),
        ({"NCCL_MAX_NCHANNELS": "eight"}, 3, "IB", "not an integer"),
        ({"NCCL_MIN_NCHANNELS": "16", "NCCL_MAX_NCHANNELS": "8"}, 3, "IB", "above NCCL_MAX_NCHANNELS"),
        ({"NCCL_IB_DISABLE": "1"}, 3, "IB", "RDMA disabled"),
        ({"NCCL_NET": "Socket"}, 3, "IB", "disagrees with the shape's fabric.nccl_net"),
        ({"NCCL_SOCKET_IFNAME": "docker0"}, 3, "IB", "cannot reach the other nodes"),
    ],
)
def test_known_wrong_settings(env: dict[str, str], nodes: int, net: str, fragment: str) -> None:
    out = Collector()
    check_nccl_environment(env, nodes, net, "$.env", out)
    assert any(fragment in p.render() for p in out.errors), [p.render() for p in out.items]


def test_good_settings_pass() -> None:
    out = Collector()
    check_nccl_environment(nccl_environment(8, {"transport": "switch", "nccl_net": "IB"}), 8, "IB", "$", out)
    check_nccl_environment(nccl_environment(3, {"transport": "direct", "nccl_net": "Socket"}), 3, "Socket", "$", out)
    assert out.items == []
