# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils._nvidia_smi import (
    FIELDS,
    QUERY,
    convert,
    failure_message,
    is_not_available,
    parse_header,
    parse_query_csv,
    query_argv,
)
from ansible_collections.dgxspark.cluster.tests.unit.plugins.module_utils.node_facts_support import (
    GB10,
    H200,
    sample_body,
)

H200_QUERY = (
    "index,name,uuid,driver_version,memory.total,memory.used,memory.free,clocks.current.sm,clocks.max.sm,"
    "clocks.current.memory,clocks.max.memory,temperature.gpu,power.draw,compute_cap,pci.bus_id"
).split(",")


def first_block(text: str) -> str:
    return text.split("\n\n")[0]


# (output, fields for headerless output or None, expected subset of the first device)
CASES: list[tuple[str, str, list[str] | None, dict[str, Any]]] = [
    (
        "gb10 fixture: node_facts' own query",
        (GB10 / "tools" / "nvidia-smi-query.csv").read_text(),
        None,
        {
            "index": 0,
            "name": "NVIDIA GB10",
            "pci_bus_id": "0000000F:01:00.0",
            "driver_version": "580.178.04",
            "compute_cap": "12.1",
            "pstate": "P0",
            "memory_total_mib": None,
            "memory_used_mib": None,
            "memory_free_mib": None,
            "clocks_graphics_mhz": 2522,
            "clocks_max_graphics_mhz": 3003,
            "clocks_sm_mhz": 2496,
            "clocks_memory_mhz": None,
            "temperature_c": 50,
            "power_draw_w": 15.57,
        },
    ),
    (
        "gb10 colonel-otto: csv with header and units",
        sample_body("nvidia-smi-query-gpu.gb10.colonel-otto-gpu_clocks-max-3003MHz.csv.txt"),
        None,
        {"name": "NVIDIA GB10", "clocks_graphics_mhz": 2522, "clocks_max_graphics_mhz": 3003, "power_draw_w": 15.57},
    ),
    (
        "gb10 dgx1 before-4k: csv with header and units",
        "\n".join(
            sample_body("host-state.spark-dgx1-before-4k.uname-pagesize-meminfo-cmdline-smi.txt").splitlines()[-3:-1]
        ),
        None,
        {"driver_version": "580.178.04", "temperature_c": 56, "clocks_sm_mhz": 2496, "power_draw_w": 35.45},
    ),
    (
        "gb10 jethac: noheader, memory.total [N/A]",
        sample_body("nvidia-smi-query-gpu.gb10.jethac-name-cc-driver-memtotal.csv.txt"),
        ["name", "compute_cap", "driver_version", "memory.total"],
        {"name": "NVIDIA GB10", "compute_cap": "12.1", "driver_version": "580.159.03", "memory_total_mib": None},
    ),
    (
        "gb10 jethac: noheader nounits, memory [N/A], utilization a number",
        sample_body("nvidia-smi-query-gpu.gb10.jethac-name-memused-memtotal-util.csv.txt"),
        ["name", "memory.used", "memory.total", "utilization.gpu"],
        {"name": "NVIDIA GB10", "memory_used_mib": None, "memory_total_mib": None, "utilization_gpu_pct": 6},
    ),
    (
        "gb10 llama-swap issue: [N/A] memory",
        first_block(sample_body("nvidia-smi-query-gpu.gb10.llama-swap-issue-782.txt")),
        ["memory.used", "memory.total", "utilization.memory"],
        {"memory_used_mib": None, "memory_total_mib": None, "utilization_memory": "0"},
    ),
    (
        "gb10 marimo PR: noheader nounits",
        sample_body("nvidia-smi-query-gpu.gb10.marimo-pr-6822-noheader-nounits.txt"),
        ["index", "name", "memory.total", "memory.used", "memory.free"],
        {"index": 0, "name": "NVIDIA GB10", "memory_total_mib": None, "memory_free_mib": None},
    ),
    (
        "h200: csv with header and units (real)",
        (H200 / "query-gpu.csv").read_text(),
        None,
        {
            "index": 0,
            "name": "NVIDIA H200",
            "uuid": "GPU-b80ee235-eb03-4d7f-38bb-f734e8b0b923",
            "driver_version": "580.159.04",
            "memory_total_mib": 143771,
            "memory_used_mib": 0,
            "memory_free_mib": 143156,
            "clocks_sm_mhz": 345,
            "clocks_max_sm_mhz": 1980,
            "clocks_memory_mhz": 3201,
            "temperature_c": 36,
            "power_draw_w": 81.36,
            "compute_cap": "9.0",
            "pci_bus_id": "00000000:00:06.0",
            "clocks_graphics_mhz": None,  # not in that query
            "pstate": None,
        },
    ),
    (
        "h200: noheader nounits (real)",
        (H200 / "query-gpu-noheader-nounits.csv").read_text(),
        H200_QUERY,
        {"name": "NVIDIA H200", "memory_total_mib": 143771, "power_draw_w": 79.71, "clocks_max_memory_mhz": 3201},
    ),
]


@pytest.mark.parametrize("label,text,fields,expected", CASES, ids=[c[0] for c in CASES])
def test_query_outputs(label: str, text: str, fields: list[str] | None, expected: dict[str, Any]) -> None:
    devices, unreadable = parse_query_csv(text, fields)
    assert unreadable == []
    assert len(devices) == 1
    device = devices[0]
    assert {key: device[key] for key in expected} == expected
    assert {field.key for field in FIELDS} <= set(device)


def test_the_query_is_documented_and_every_field_is_known() -> None:
    argv = query_argv("/usr/bin/nvidia-smi")
    assert argv == ["/usr/bin/nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,nounits"]
    header = (GB10 / "tools" / "nvidia-smi-query.csv").read_text().splitlines()[0]
    assert parse_header(header) == QUERY.split(",")
    assert set(H200_QUERY) <= set(QUERY.split(","))


def test_several_gpus() -> None:
    header, row = (H200 / "query-gpu.csv").read_text().splitlines()
    devices, _unreadable = parse_query_csv("\n".join([header, row, row.replace("0, NVIDIA", "1, NVIDIA", 1)]))
    assert [d["index"] for d in devices] == [0, 1]


@pytest.mark.parametrize(
    "value,missing",
    [
        ("[N/A]", True),
        ("N/A", True),
        ("Not Supported", True),
        ("[Not Supported]", True),
        ("[Unknown Error]", True),
        ("[Insufficient Permissions]", True),
        ("[GPU requires reset]", True),
        (" ", True),
        ("0", False),
        ("NVIDIA GB10", False),
    ],
)
def test_not_available(value: str, missing: bool) -> None:
    assert is_not_available(value) is missing


@pytest.mark.parametrize(
    "query,value,expected",
    [
        ("memory.total", "143771 MiB", 143771),
        ("memory.total", " 143771", 143771),
        ("power.draw", "81.36 W", 81.36),
        ("clocks.current.graphics", "2522 MHz", 2522),
        ("temperature.gpu", "36", 36),
        ("utilization.gpu", "6 %", 6),
        ("utilization.memory", "6 %", "6 %"),
        ("memory.total", "[N/A]", None),
    ],
)
def test_convert(query: str, value: str, expected: Any) -> None:
    assert convert(query, value) == expected


def test_a_number_that_is_not_one_is_null_and_named() -> None:
    devices, unreadable = parse_query_csv("index, temperature.gpu\n0, hot\n")
    assert devices[0]["temperature_c"] is None
    assert unreadable == ["GPU row 0: temperature.gpu: expected a number, found 'hot'"]


@pytest.mark.parametrize(
    "text,fields,message",
    [
        ("", None, "no output"),
        ("index, name\n0\n", None, "expected 2 values"),
        ("index, name (bad)\n", None, "header cell"),
        ("0, NVIDIA GB10, x\n", ["index", "name"], "expected 2 values"),
    ],
)
def test_malformed_output(text: str, fields: list[str] | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_query_csv(text, fields)


def test_no_gpu_means_no_devices() -> None:
    assert parse_query_csv("index, name\n") == ([], [])


@pytest.mark.parametrize(
    "rc,stdout,stderr,message",
    [
        (
            9,
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
            "NVIDIA driver is installed and running.\n\n",
            "",
            "nvidia-smi exited 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
        ),
        (6, "No devices were found\n", "", "nvidia-smi exited 6: No devices were found"),
        (2, "", 'Field "bogus" is not a valid field to query.\n', 'nvidia-smi exited 2: Field "bogus"'),
        (1, "", "", "nvidia-smi exited 1 without a message"),
    ],
)
def test_failure_message(rc: int, stdout: str, stderr: str, message: str) -> None:
    assert failure_message(rc, stdout, stderr).startswith(message)
