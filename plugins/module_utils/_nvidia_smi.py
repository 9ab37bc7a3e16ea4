# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``nvidia-smi --query-gpu`` CSV: the query node_facts runs, and a parser for that and similar output.

The query (one call, one line per GPU, header kept so the columns are checked, units dropped)::

    nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version,compute_cap,pstate,memory.total,
      memory.used,memory.free,clocks.current.graphics,clocks.max.graphics,clocks.current.sm,clocks.max.sm,
      clocks.current.memory,clocks.max.memory,temperature.gpu,power.draw,utilization.gpu --format=csv,nounits

``utilization.gpu`` is what the clock-latch check (``_gpu_clocks``) needs to tell a GPU under load from an
idle one.

Every field exists in the 580 drivers DGX OS ships (an unknown field makes nvidia-smi reject the whole
query). On a GB10 the memory fields read ``[N/A]`` (unified memory: there is no separate GPU memory to
report) and the table form prints ``Not Supported``; any such value, and any other bracketed nvidia-smi
placeholder (``[Unknown Error]``, ``[Insufficient Permissions]``, ...), becomes null. The parser also reads
the header-with-units form (``143771 MiB``) and headerless output when told the fields.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence


@dataclass(frozen=True)
class Field:
    query: str
    """The --query-gpu name."""
    key: str
    """The fact's name."""
    kind: str
    """str, int or float."""


FIELDS: tuple[Field, ...] = (
    Field("index", "index", "int"),
    Field("name", "name", "str"),
    Field("uuid", "uuid", "str"),
    Field("pci.bus_id", "pci_bus_id", "str"),
    Field("driver_version", "driver_version", "str"),
    Field("compute_cap", "compute_cap", "str"),
    Field("pstate", "pstate", "str"),
    Field("memory.total", "memory_total_mib", "int"),
    Field("memory.used", "memory_used_mib", "int"),
    Field("memory.free", "memory_free_mib", "int"),
    Field("clocks.current.graphics", "clocks_graphics_mhz", "int"),
    Field("clocks.max.graphics", "clocks_max_graphics_mhz", "int"),
    Field("clocks.current.sm", "clocks_sm_mhz", "int"),
    Field("clocks.max.sm", "clocks_max_sm_mhz", "int"),
    Field("clocks.current.memory", "clocks_memory_mhz", "int"),
    Field("clocks.max.memory", "clocks_max_memory_mhz", "int"),
    Field("temperature.gpu", "temperature_c", "int"),
    Field("power.draw", "power_draw_w", "float"),
    Field("utilization.gpu", "utilization_gpu_pct", "int"),
)
FIELDS_BY_QUERY: dict[str, Field] = {field.query: field for field in FIELDS}
QUERY = ",".join(field.query for field in FIELDS)
NOT_AVAILABLE = frozenset({"", "N/A", "Not Supported", "Unknown Error", "Insufficient Permissions"})

_HEADER_CELL = re.compile(r"^([A-Za-z0-9_.]+)(?:\s*\[[^\]]*\])?$")
_NUMBER = re.compile(r"^(-?\d+(?:\.\d+)?)(?:\s*[A-Za-z%]+)?$")


def query_argv(binary: str) -> list[str]:
    return [binary, f"--query-gpu={QUERY}", "--format=csv,nounits"]


def is_not_available(value: str) -> bool:
    """nvidia-smi's placeholders for a value it cannot give: [N/A], Not Supported, [Unknown Error], ..."""
    value = value.strip()
    return value in NOT_AVAILABLE or (value.startswith("[") and value.endswith("]"))


def parse_header(line: str) -> list[str]:
    """``index, memory.total [MiB], ...`` -> ["index", "memory.total", ...]."""
    names: list[str] = []
    for cell in line.split(","):
        match = _HEADER_CELL.match(cell.strip())
        if not match:
            raise ValueError(f"not an nvidia-smi CSV header cell: {cell.strip()!r}")
        names.append(match.group(1))
    return names


def convert(query: str, value: str) -> Any:
    """One CSV cell as its fact value; raises ``ValueError`` for a number that is not one."""
    value = value.strip()
    if is_not_available(value):
        return None
    field = FIELDS_BY_QUERY.get(query)
    kind = field.kind if field else "str"
    if kind == "str":
        return value
    match = _NUMBER.match(value)
    if not match:
        raise ValueError(f"{query}: expected a number, found {value!r}")
    number = float(match.group(1))
    return number if kind == "float" else int(number)


def fact_key(query: str) -> str:
    field = FIELDS_BY_QUERY.get(query)
    return field.key if field else query.replace(".", "_")


def parse_query_csv(text: str, fields: Sequence[str] | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Devices from ``--query-gpu`` CSV output, and the cells that could not be read.

    Without ``fields`` the first line is the header (``--format=csv``); with it, the output has none
    (``csv,noheader``). Every known field is present in each device (null when not queried or not available);
    other queried fields are added under their name with dots as underscores. A cell that should be a number
    and is not becomes null and is named in the second list; a row with the wrong number of cells raises
    ``ValueError``.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if fields is None:
        if not lines:
            raise ValueError("no output (expected a CSV header line)")
        columns = parse_header(lines[0])
        rows = lines[1:]
    else:
        columns = list(fields)
        rows = lines
    devices: list[dict[str, Any]] = []
    unreadable: list[str] = []
    for row in rows:
        cells = row.split(",")
        if len(cells) != len(columns):
            raise ValueError(f"expected {len(columns)} values ({', '.join(columns)}), found {len(cells)}: {row!r}")
        device: dict[str, Any] = {field.key: None for field in FIELDS}
        for query, cell in zip(columns, cells):
            try:
                device[fact_key(query)] = convert(query, cell)
            except ValueError as error:
                device[fact_key(query)] = None
                unreadable.append(f"GPU row {len(devices)}: {error}")
        devices.append(device)
    return devices, unreadable


def failure_message(rc: int, stdout: str, stderr: str) -> str:
    """What a failed nvidia-smi said (``NVIDIA-SMI has failed because it couldn't communicate ...``)."""
    said = next((line.strip() for line in (stdout + "\n" + stderr).splitlines() if line.strip()), "")
    return f"nvidia-smi exited {rc}: {said}" if said else f"nvidia-smi exited {rc} without a message"
