# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bench's node monitor: MemAvailable and the GPU clocks sampled on a node until told to stop.

No Ansible imports, standard library only. ``bench.yml`` starts it on every node before the benchmark
(an async task) and stops it after (a stop file): each MemAvailable sample is ``[epoch seconds, bytes]``,
each GPU sample one ``nvidia-smi --query-gpu`` (node_facts' query); the GPU clock-latch check judges
the GPU samples (``_gpu_clocks``). Its own sampler, not the memory guard's: the guard keeps only its last
sample and the samples of a trip, not a series over a whole run.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

from ansible_collections.dgxspark.cluster.plugins.module_utils._gpu_clocks import judge_clock_latch
from ansible_collections.dgxspark.cluster.plugins.module_utils._nvidia_smi import parse_query_csv
from ansible_collections.dgxspark.cluster.plugins.module_utils._procfs import parse_meminfo

Runner = Callable[[], "tuple[int, str, str] | None"]


def mem_available(proc_root: str = "/proc") -> int | None:
    """MemAvailable in bytes from ``<proc_root>/meminfo``; None when it cannot be read."""
    try:
        with open(os.path.join(proc_root, "meminfo"), encoding="ascii") as handle:
            return parse_meminfo(handle.read()).get("MemAvailable")
    except (OSError, ValueError):
        return None


def monitor(
    stop_file: str,
    interval: float,
    gpu_interval: float,
    max_seconds: float,
    query_gpu: Runner | None,
    read_memory: Callable[[], int | None],
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Sample until ``stop_file`` exists or ``max_seconds`` have passed. The stop file is left where it is: whoever
    made it removes it (bench.yml, once it has the samples), so that its maker never races the monitor's removal.

    ``query_gpu`` runs nvidia-smi's query (None: no GPU sampling) and returns (rc, stdout, stderr) or None
    when it timed out. Returns ``mem_available`` (``[[t, bytes], ...]``), ``gpu`` (``[[t, devices]]``),
    ``gpu_error`` (the last failure, or None), ``clock_latch`` (the verdict over the GPU samples, None
    without any), ``stopped_by`` (``stop_file`` or ``max_seconds``) and ``seconds``."""
    started = clock()
    memory: list[list[float]] = []
    gpu: list[list[Any]] = []
    gpu_error = None
    next_gpu = started
    stopped_by = "max_seconds"
    while True:
        now = clock()
        value = read_memory()
        if value is not None:
            memory.append([round(now, 3), value])
        if query_gpu is not None and gpu_interval > 0 and now >= next_gpu:
            next_gpu = now + gpu_interval
            answer = query_gpu()
            if answer is None:
                gpu_error = "nvidia-smi did not answer in time"
            elif answer[0] != 0:
                gpu_error = f"nvidia-smi exited {answer[0]}: {(answer[2] or answer[1]).strip()[:200]}"
            else:
                try:
                    devices, _unreadable = parse_query_csv(answer[1])
                    gpu.append([round(now, 3), devices])
                except ValueError as error:
                    gpu_error = f"could not read nvidia-smi's output: {error}"
        if os.path.exists(stop_file):
            stopped_by = "stop_file"
            break
        if now - started >= max_seconds:
            break
        sleep(interval)
    return {
        "mem_available": memory,
        "gpu": gpu,
        "gpu_error": gpu_error,
        "clock_latch": judge_clock_latch([devices for _t, devices in gpu]) if gpu else None,
        "stopped_by": stopped_by,
        "seconds": round(clock() - started, 3),
    }
