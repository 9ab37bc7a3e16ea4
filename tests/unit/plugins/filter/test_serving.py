# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.filter.serving import FilterModule
from ansible_collections.dgxspark.cluster.tests.unit.conftest import SPARK3, SPARK8, edited, read

FILTERS = FilterModule().filters()


def test_nccl_environment() -> None:
    env = FILTERS["nccl_environment"](str(SPARK8), shape="tp8-1m")
    assert env["NCCL_MAX_NCHANNELS"] == "8" and env["NCCL_NET"] == "IB"
    assert "DSV41_ENGRAM_DISK" not in env
    socket = FILTERS["nccl_environment"](read(SPARK3), nccl_net="Socket", socket_ifname="enp1s0f0np0")
    assert socket["NCCL_NET"] == "Socket" and socket["NCCL_SOCKET_IFNAME"] == "enp1s0f0np0"
    with pytest.raises(AnsibleFilterError, match="unknown NCCL transport"):
        FILTERS["nccl_environment"](str(SPARK3), nccl_net="RoCE")


def test_container_ulimits() -> None:
    assert FILTERS["container_ulimits"](str(SPARK8))["nofile"] == {"soft": 1048576, "hard": 1048576}
    assert FILTERS["container_ulimits"](str(SPARK3))["memlock"] == {"soft": -1, "hard": -1}


def test_memory_budget() -> None:
    budget = FILTERS["memory_budget"](str(SPARK8), shape="tp8-1m")
    assert (budget["held_gib"], budget["budget_gib"], budget["fits"]) == (60.5, 90.75, True)


def test_rank_argv() -> None:
    argv = FILTERS["rank_argv"](str(SPARK3), 2, "198.51.100.10")
    assert argv[:2] == ["docker", "run"] and "--headless" in argv
    assert argv[argv.index("--node-rank") + 1] == "2"
    assert argv[argv.index("--master-addr") + 1] == "198.51.100.10"
    assert not any(a.startswith("VLLM_HOST_IP=") for a in argv)
    own = FILTERS["rank_argv"](str(SPARK3), 2, "198.51.100.10", address="198.51.100.12")
    assert "VLLM_HOST_IP=198.51.100.12" in own
    assert "VLLM_HOST_IP=198.51.100.10" in FILTERS["rank_argv"](str(SPARK3), 0, "198.51.100.10")
    with pytest.raises(AnsibleFilterError, match="not a rank of shape tp3-triangle"):
        FILTERS["rank_argv"](str(SPARK3), 3, "198.51.100.10")
    with pytest.raises(AnsibleFilterError, match="not an IPv4 address"):
        FILTERS["rank_argv"](str(SPARK3), 0, "head.example")


def test_rank_argv_with_overrides_that_break_agreement() -> None:
    with pytest.raises(AnsibleFilterError, match="ranks disagree"):
        FILTERS["rank_argv"](str(SPARK3), 1, "198.51.100.10", overrides={"sizing": {"max_num_seqs": 6}})


def test_invalid_profile_is_an_error(spark3: dict[str, Any]) -> None:
    with pytest.raises(AnsibleFilterError, match=r"\$\.host\.startup_memguard_gib"):
        FILTERS["memory_budget"](edited(spark3, {"host/startup_memguard_gib": 1}))
    with pytest.raises(AnsibleFilterError, match="not a profile"):
        FILTERS["memory_budget"](42)


def test_the_memory_budget_figures_are_those_the_plan_could_work_out_without_the_components() -> None:
    budget = FILTERS["memory_budget"](str(SPARK3))
    figures = FILTERS["memory_budget_figures"](budget)
    assert "components_gib" not in figures and None not in figures.values()
    assert figures == {k: v for k, v in budget.items() if v is not None and k != "components_gib"}
    assert figures["max_model_len"] == budget["max_model_len"]
    assert FILTERS["memory_budget_figures"]({"usable_gib": None, "fits": False, "components_gib": {}}) == {
        "fits": False
    }
    with pytest.raises(AnsibleFilterError, match="memory_budget_figures: needs a memory budget"):
        FILTERS["memory_budget_figures"]([])
