# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The two seeds' rules, one named check each (docs/seed-rules.md lists them with their tests).

An error where a seed states a rule or reports a failure, a warning where it only advises. Every
message names its seed and section. An error whose check name is in ``WAIVABLE_CHECKS`` can be waived
by the profile, with a reason, where a real one exists (the simulated cluster, a fork's engine).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Collector
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.kv import (
    GIB,
    MIN_PLAUSIBLE_KV_BYTES_PER_TOKEN,
    KVCost,
    kv_bytes_per_token,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile import docker_args as docker

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.vllm import ServeArgv

# Container limits (seed 002 section 4.2; seed 000's docker_run_args).
STACK_BYTES = 67108864  # --ulimit=stack=67108864: "Stack van 64 MB"
MEMORY_LIMIT_GIB = 112  # --memory=112g
OS_RESERVE_GIB = 9  # "9 GB vrijlaten voor het besturingssysteem (121 GB totaal)"
USABLE_GIB = 121  # seed 002 section 4.2: 121 in all; MemTotal of a 4K-page Spark is 121.69 GiB
SHM_GIB = 16  # seed 000: --shm-size=16g
SEED002_RANKS = 8  # seed 002's shapes: 8 ranks (seed 000's: 3 and 4)
GB10_CPUS = 20  # seed 002 section 2: 10 Cortex-X925 + 10 Cortex-A725
# MemTotal of a real Spark (docs/units.md): 127,598,768 kB on the 4K-page kernel, 129,798,784 kB on 64K.
GB10_MEMTOTAL_GIB = 129798784 / 1024**2

# Concurrency at 1M context (seed 000: "4 is the stable operating point at 1M context. 6 and 8 both
# crashed during load." on 3 nodes; seed 002 section 5.2 ran max_num_seqs 8 at 1M on 8 nodes).
ONE_M = 1048576  # seed 000's max_model_len, 1,048,576
ONE_M_TOKENS = 1_000_000  # "1M" by meaning: the rule applies from a decimal million tokens
SEED000_KV_BYTES = 2362232012  # seed 000's tp3-triangle kv_cache_memory_bytes, sized for one 1,048,576 sequence
SEED000_BYTES_PER_TOKEN = SEED000_KV_BYTES // ONE_M  # 2,252 bytes per token per rank (of 2,252.8: whole bytes)
STABLE_SEQS_AT_1M = 4
CRASHED_SEQS_AT_1M = 6
SEQS_MEASURED_AT_1M_ON_8 = 8

# AutoTuner (seed 002 lesson 5): DeepGEMM/CUTLASS mxfp8_gemm autotune, ~10 GB while profiling, runs
# even when VLLM_FLASHINFER_AUTOTUNE=0.
AUTOTUNE_PEAK_GIB = 10
AUTOTUNE_COMPONENT = "autotune_peak"
SEED002_300K = 300000  # seed 002 section 5.1's max_model_len, where the AutoTuner is off
ENGRAM_DISK_ENV = "DSV41_ENGRAM_DISK"
NCCL_BUDGET_RANKS = 8  # seed 002 lesson 1: NCCL's share at 8 ranks
NCCL_GIB_AT_8 = 11
FLASHINFER_AUTOTUNE_ENV = "VLLM_FLASHINFER_AUTOTUNE"
# Its serve flag (with --disable-flashinfer-autotune and --no-enable-flashinfer-autotune, the same switch).
AUTOTUNE_FLAG = "--enable-flashinfer-autotune"
ENGRAM_MEMORY_IMAGE = "engram-mem"

# The memory guard (seed 000: "A guard that kills at a fixed headroom threshold without grace produced ten consecutive
# false kills on a cold load. The working configuration is a 5 GiB startup floor with a 45 s grace, dropping to a
# 3 GiB steady floor with a 30 s grace"; "at least 100 GiB MemAvailable on every node" before a boot; "Minimum
# headroom during the long-context test: 6.8 GiB (head node)").
GUARD_GRACE_S = {"startup_": 45.0, "": 30.0}
GUARD_FLOOR_GIB = {"startup_": 5.0, "": 3.0}
PRE_BOOT_FLOOR_GIB = 100.0
SEED000_MIN_HEADROOM_GIB = 6.8
# At or under the memory guard's emergency floor (roles/memguard: memguard_emergency_floor_gib 1.0, "a GB10 can freeze
# within seconds") the floor's grace never runs: only the emergency trip stands between the rank and the kernel's OOM.
GUARD_EMERGENCY_GIB = 1.0
GUARD_GRACE_CHECK = "memguard-grace"
GUARD_FLOOR_CHECK = "memguard-floors"
PRE_BOOT_FLOOR_CHECK = "min-mem-available"  # seed 002 section 3.2: the image with the Engram patches reverted


def check_container_limits(
    args: Sequence[str],
    where_of: Mapping[str, str],
    base: str,
    memory_limit: float | None,
    swap: float | None,
    out: Collector,
    usable_gib: float | None = None,
    nodes: int = 3,
) -> None:
    """Stack, memory and swap, shared memory and CPU pinning, as the seeds set them."""
    _check_stack(args, where_of, base, out)
    _check_memory_limit(where_of, base, memory_limit, swap, usable_gib or USABLE_GIB, out)
    _check_ipc(args, where_of, base, out)
    _check_cpuset(args, where_of, base, out, nodes)


def _check_stack(args: Sequence[str], where_of: Mapping[str, str], base: str, out: Collector) -> None:
    stack = docker.container_ulimits(args).get("stack")
    small = stack is not None and any(v != -1 and v < STACK_BYTES for v in (stack.soft, stack.hard))
    if stack is None or small:
        out.error(
            where_of.get("--ulimit", base),
            "the stack ulimit must be 64 MiB (seed 002 section 4.2: ulimit stack 67108864, 'Stack van 64 MB'; "
            "seed 000's docker_run_args carry it too); Docker's default is the daemon's, usually 8 MiB",
            found=None if stack is None else f"stack={stack.soft}:{stack.hard}",
            expected=f'"--ulimit=stack={STACK_BYTES}:{STACK_BYTES}"',
            check="stack-64m",
        )


def _check_memory_limit(
    where_of: Mapping[str, str],
    base: str,
    memory_limit: float | None,
    swap: float | None,
    usable: float,
    out: Collector,
) -> None:
    if memory_limit is None:
        out.error(
            base,
            "no --memory limit: seed 002 section 4.2 caps the container at 112g to leave 9 GB of the 121 "
            "for the OS, and seed 000 runs --memory=112g; without it a runaway rank takes the host's last "
            "memory and a GB10 freezes instead of killing the container",
            expected=f'"--memory={MEMORY_LIMIT_GIB}g" and "--memory-swap={MEMORY_LIMIT_GIB}g"',
            check="container-memory-limit",
        )
    elif memory_limit > usable - OS_RESERVE_GIB:
        out.error(
            where_of["--memory"],
            f"--memory leaves {max(0.0, usable - memory_limit):g} GiB of the {usable:g} GiB for the OS, less than the "
            f"{OS_RESERVE_GIB} GiB seed 002 section 4.2 keeps ('9 GB vrijlaten voor het besturingssysteem "
            "(121 GB totaal)'; its GB are GiB, docs/units.md)",
            found=f"{memory_limit:g} GiB",
            expected=f"<= {usable - OS_RESERVE_GIB:g} GiB (seed 002, seed 000: 112g)",
            check="container-memory-limit",
        )
    if memory_limit is not None and (swap is None or swap > memory_limit):
        out.error(
            where_of.get("--memory-swap", where_of["--memory"]),
            "swap headroom: seed 000 runs --memory-swap equal to --memory ('no swap headroom: swapping a "
            "model load is worse than failing it'); without --memory-swap Docker adds as much swap again",
            found=None if swap is None else f"{swap:g} GiB",
            expected=f'"--memory-swap={memory_limit:g}g" (seed 000: 112g / 112g)',
            check="no-swap-headroom",
        )


def _check_ipc(args: Sequence[str], where_of: Mapping[str, str], base: str, out: Collector) -> None:
    ipc = docker.option_values(args, "--ipc")
    shm = docker.option_values(args, "--shm-size")
    host_ipc = bool(ipc) and ipc[-1] == "host"
    if not host_ipc:
        out.error(
            where_of.get("--ipc", base),
            "--ipc=host is missing: seed 000 runs the ranks with the host's IPC namespace (vLLM's "
            "workers and NCCL share memory through it); a private namespace gets a 64 MB /dev/shm",
            found=ipc[-1] if ipc else None,
            expected='"--ipc=host" (seed 000)',
            check="ipc-host",
        )
    if not shm:
        out.warn(
            base,
            "no --shm-size: seed 000 sets --shm-size=16g alongside --ipc=host; with --ipc=host Docker "
            "uses the host's /dev/shm and ignores it, so it only takes effect if --ipc changes",
            expected=f'"--shm-size={SHM_GIB}g" (seed 000)',
        )
    elif not host_ipc:
        try:
            size = docker.parse_size(shm[-1]) / GIB
        except ValueError:
            return
        if size < SHM_GIB:
            out.error(
                where_of["--shm-size"],
                "without --ipc=host the container's /dev/shm is --shm-size, below seed 000's 16g",
                found=shm[-1],
                expected=f'"--shm-size={SHM_GIB}g" (seed 000)',
                check="ipc-host",
            )


def cpuset_cpus(text: str) -> set[int]:
    """Docker's --cpuset-cpus syntax (``0-9``, ``0,2,4``, ``0-3,8-11``) as CPU numbers."""
    cpus: set[int] = set()
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise ValueError(f"'{text}' is not a CPU list such as 0-19 or 0,2,4")
        low, high = int(first), int(last) if dash else int(first)
        if high < low:
            raise ValueError(f"'{part}' is a range that runs backwards")
        cpus.update(range(low, high + 1))
    return cpus


def _check_cpuset(args: Sequence[str], where_of: Mapping[str, str], base: str, out: Collector, nodes: int) -> None:
    values = docker.option_values(args, "--cpuset-cpus")
    if not values and nodes < SEED002_RANKS:  # seed 002's 8 ranks pin no CPU set (section 4.3: NCCL ignores affinity)
        out.warn(
            base,
            "no --cpuset-cpus: seed 000 pins each rank to a CPU set (it does not publish which); "
            "set one per host in dgxspark_overrides.container.docker_run_args",
            expected='"--cpuset-cpus=<cpus>" per host (seed 000)',
            check="cpuset-pinned",
        )
        return
    if not values:
        return
    try:
        cpus = cpuset_cpus(values[-1])
    except ValueError as exc:
        out.error(where_of["--cpuset-cpus"], str(exc), found=values[-1], check="cpuset-pinned")
        return
    beyond = sorted(c for c in cpus if c >= GB10_CPUS)
    if beyond:
        out.error(
            where_of["--cpuset-cpus"],
            f"CPUs {beyond[0]}..{beyond[-1]} do not exist on a GB10 (seed 002 section 2: 20 Arm cores, "
            "0-19); Docker refuses to start the container",
            found=values[-1],
            expected=f"CPUs within 0-{GB10_CPUS - 1}",
            check="cpuset-pinned",
        )


def context_like_seed000(length: int, bytes_per_token: float | None) -> float:
    """``length`` tokens as seed 000's KV cache would count them: scaled by what a token costs against seed 000's
    2,362,232,012 bytes for 1,048,576 tokens (2,252 whole bytes per token per rank); ``length`` itself when the cost is
    unknown."""
    if not bytes_per_token:
        return float(length)
    return length * bytes_per_token / SEED000_BYTES_PER_TOKEN


def check_guard_against_seed000(host: Mapping[str, Any], out: Collector) -> None:
    """The memory guard's graces and floors, and the pre-boot floor, judged against seed 000's lesson."""
    for phase, name in (("startup_", "startup"), ("", "steady")):
        grace = host[f"{phase}memguard_grace_seconds"]
        interval = host[f"{phase}memguard_interval_seconds"]
        seed_grace = GUARD_GRACE_S[phase]
        if grace < interval:
            out.error(
                f"$.host.{phase}memguard_grace_seconds",
                f"a {name} grace period shorter than one sampling interval trips on a single low sample (seed 000: 'A "
                "guard that kills at a fixed headroom threshold without grace produced ten consecutive false kills on "
                "a cold load')",
                found=grace,
                expected=f">= {phase}memguard_interval_seconds ({interval:g}); seed 000: {seed_grace:g}",
                check=GUARD_GRACE_CHECK,
            )
        elif grace < seed_grace:
            out.warn(
                f"$.host.{phase}memguard_grace_seconds",
                f"a {name} grace of {grace:g} s is shorter than the {seed_grace:g} s that rode out seed 000's load "
                "dips ('ten consecutive false kills on a cold load' without grace; 'a 5 GiB startup floor with a 45 s "
                "grace, dropping to a 3 GiB steady floor with a 30 s grace')",
                found=grace,
                expected=f">= {seed_grace:g} (seed 000)",
                check=GUARD_GRACE_CHECK,
            )
        floor = host[f"{phase}memguard_gib"]
        if floor <= GUARD_EMERGENCY_GIB:
            out.error(
                f"$.host.{phase}memguard_gib",
                f"a {name} floor of {floor:g} GiB leaves the guard unable to fire before the kernel's own OOM: at or "
                f"under the guard's emergency floor ({GUARD_EMERGENCY_GIB:g} GiB, roles/memguard: 'a GB10 can freeze "
                "within seconds') its grace never runs (seed 000 guards at 5 GiB starting and 3 GiB serving)",
                found=floor,
                expected=f"> {GUARD_EMERGENCY_GIB:g} GiB; seed 000: {GUARD_FLOOR_GIB[phase]:g}",
                check=GUARD_FLOOR_CHECK,
            )
        elif floor >= SEED000_MIN_HEADROOM_GIB:
            out.warn(
                f"$.host.{phase}memguard_gib",
                f"a {name} floor of {floor:g} GiB would have stopped seed 000's own long-context test, which served "
                f"with {SEED000_MIN_HEADROOM_GIB:g} GiB of headroom at its lowest ('Minimum headroom during the "
                "long-context test: 6.8 GiB (head node)'); seed 000 guards at 5 GiB starting and 3 GiB serving",
                found=floor,
                expected=f"< {SEED000_MIN_HEADROOM_GIB:g} GiB; seed 000: {GUARD_FLOOR_GIB[phase]:g}",
                check=GUARD_FLOOR_CHECK,
            )
    pre_boot = host["min_mem_available_gib"]
    if pre_boot < PRE_BOOT_FLOOR_GIB:
        out.warn(
            "$.host.min_mem_available_gib",
            f"a pre-boot floor of {pre_boot:g} GiB is under seed 000's ('at least 100 GiB MemAvailable on every node' "
            "before a boot): a node that starts a load with less is where seed 000's cold loads dipped into the guard",
            found=pre_boot,
            expected=f">= {PRE_BOOT_FLOOR_GIB:g} (seed 000)",
            check=PRE_BOOT_FLOOR_CHECK,
        )


def check_cpu_rules(nodes: int, env: Mapping[str, str], args: Sequence[str], where: str, out: Collector) -> None:
    """The seeds' two CPU rules, each on its own seed's shapes: seed 000 pins its 3 and 4 ranks with --cpuset-cpus,
    seed 002 runs its 8 with NCCL_IGNORE_CPU_AFFINITY=1 (section 4.3) and no set. The plan renders only the shape's
    own seed's rule; a shape that has both says which one holds."""
    affinity = env.get("NCCL_IGNORE_CPU_AFFINITY")
    pinned = docker.option_values(args, "--cpuset-cpus")
    if affinity != "1" or not pinned:
        return
    own = (
        "seed 002's rule holds on this 8-rank shape: NCCL's threads ignore the set, so the pin only fences the "
        "rank's other threads"
        if nodes >= SEED002_RANKS
        else f"seed 000's rule holds on this {nodes}-rank shape: drop NCCL_IGNORE_CPU_AFFINITY (the plan renders it "
        "at 8 ranks only) so that NCCL keeps to the pinned set"
    )
    out.warn(
        f"{where}.environment.NCCL_IGNORE_CPU_AFFINITY",
        f"the seeds' CPU rules conflict: seed 000 pins each rank with --cpuset-cpus, seed 002 section 4.3 sets "
        f"NCCL_IGNORE_CPU_AFFINITY=1 (Ignore CPU affinity) and pins nothing; {own}",
        found=f"NCCL_IGNORE_CPU_AFFINITY=1 with --cpuset-cpus={pinned[-1]}",
        expected="one rule: --cpuset-cpus on 3 and 4 ranks (seed 000), NCCL_IGNORE_CPU_AFFINITY=1 on 8 (seed 002)",
        check="nccl-cpu-affinity",
    )


def check_concurrency_at_1m(
    nodes: int, sizing: Mapping[str, Any], where: str, out: Collector, bytes_per_token: float | None = None
) -> None:
    """Seed 000: at 1M context, 4 concurrent sequences are stable on 3 nodes; 6 and 8 crashed.

    "1M" by meaning: from 1,000,000 tokens (the seeds count in decimal tokens too, docs/units.md), and in seed 000's
    KV bytes: a shape whose token costs more (its measured or modelled bytes per token) reaches seed 000's 1M KV load
    at a shorter context, one whose token costs less at a longer one."""
    seqs, length = sizing["max_num_seqs"], sizing["max_model_len"]
    like = context_like_seed000(length, bytes_per_token)
    if like < ONE_M_TOKENS or seqs <= STABLE_SEQS_AT_1M:
        return
    place = f"{where}.sizing.max_num_seqs"
    measured = "seed 000: '4 is the stable operating point at 1M context. 6 and 8 both crashed during load.'"
    scaled = (
        f" (at {bytes_per_token:,.0f} KV bytes per token per rank, as much KV as {like:,.0f} tokens at seed 000's "
        f"{SEED000_BYTES_PER_TOKEN:,})"
        if bytes_per_token
        else ""
    )
    if nodes <= 3 and seqs >= CRASHED_SEQS_AT_1M:
        out.error(
            place,
            f"{seqs} concurrent sequences at {length} tokens of context on {nodes} nodes{scaled}; {measured}",
            found=seqs,
            expected=f"<= {STABLE_SEQS_AT_1M}",
            hint="a hard cap on concurrent sequences is one of the four things seed 000 says to get right",
            check="concurrency-at-1m",
        )
    elif nodes <= 3:
        out.warn(
            place,
            f"{seqs} concurrent sequences at 1M context is untested on {nodes} nodes, between the stable 4 and "
            f"the 6 that crashed ({measured}){scaled}",
            found=seqs,
            expected=f"<= {STABLE_SEQS_AT_1M}",
            check="concurrency-at-1m",
        )
    elif not (nodes >= 8 and seqs <= SEQS_MEASURED_AT_1M_ON_8):
        out.warn(
            place,
            f"{seqs} concurrent sequences at 1M context on {nodes} nodes is not measured in the seeds ({measured} "
            "on 3 nodes; seed 000 lists tp4-ring's 16 as 'defined, untested'; seed 002 section 5.2 ran 8 on 8 nodes)"
            + scaled,
            found=seqs,
            expected=f"<= {STABLE_SEQS_AT_1M}, or a load test at this setting",
            check="concurrency-at-1m",
        )


def check_kv_left_to_gmu(
    sizing: Mapping[str, Any], memory: Mapping[str, Any] | None, where: str, out: Collector
) -> None:
    """Seed 000: letting vLLM size the KV cache from gpu_memory_utilization is one request away from OOM.

    A shape passes when it fixes the KV cache (``sizing.kv_cache_memory_bytes``), or when its memory budget gives
    the KV cache vLLM leaves at this gpu_memory_utilization (``memory.kv_cache_gib``, as seed 002 section 6 reports
    ~8.7 and ~30 GB for its two configurations): then the KV cache is known, not inferred, and the budget's checks
    hold it to one max_model_len sequence and to the budget."""
    if "kv_cache_memory_bytes" in sizing or (memory or {}).get("kv_cache_gib") is not None:
        return
    out.error(
        f"{where}.sizing",
        "the KV cache is left to gpu_memory_utilization: seed 000 says inferring it 'produces a boot that "
        "is one request away from OOM' and sizes it explicitly",
        found=sizing.get("gpu_memory_utilization"),
        expected="sizing.kv_cache_memory_bytes (seed 000: 2,362,232,012 for tp3-triangle), or the KV cache vLLM "
        "reports at this gpu_memory_utilization in memory.kv_cache_gib (seed 002 section 6)",
        check="kv-cache-explicit",
    )


def check_engram(shape: Mapping[str, Any], env: Mapping[str, str], image: str, where: str, out: Collector) -> None:
    """Engram placement, its environment switch and its image agree (seed 002 sections 3 and 5)."""
    placement = shape.get("engram", {}).get("placement")
    flag = env.get(ENGRAM_DISK_ENV)
    if placement == "disk" and flag is not None and flag != "1":
        out.error(
            f"{where}.environment.{ENGRAM_DISK_ENV}",
            "engram.placement is disk but the environment turns Engram-on-disk off "
            "(seed 002 section 5.2: DSV41_ENGRAM_DISK 1, 'Engram-rijen op lokale NVMe')",
            found=flag,
            expected='"1", or leave it out: placement disk sets it',
        )
    if placement != "disk" and flag not in (None, "0"):
        out.error(
            f"{where}.environment.{ENGRAM_DISK_ENV}",
            f"{ENGRAM_DISK_ENV}={flag} puts the Engram tables on disk, but engram.placement is "
            f"{placement or 'not set'} (seed 002 sections 1 and 5)",
            found=flag,
            expected='engram.placement "disk", or no DSV41_ENGRAM_DISK',
        )
    if placement == "disk" and ENGRAM_MEMORY_IMAGE in image:
        out.error(
            f"{where}.engram.placement",
            f"image {image} has the Engram-on-disk patch reverted (seed 002 section 3.2: vllm-dsv41:engram-mem "
            "restores the original engram.py, model_state.py and weight_utils.py), so it cannot place Engram on disk",
            found=image,
            expected="an image with the Engram-on-disk patch (seed 002 section 3.1: vllm-dsv41:latest)",
            check="engram-image",
        )


def check_autotune(
    shape: Mapping[str, Any],
    serve_flags: Sequence[str] | ServeArgv,
    budget: Mapping[str, Any],
    where: str,
    out: Collector,
) -> None:
    """The AutoTuner setting, its environment variable and serve flags agree; its peak is in the budget."""
    autotuner = shape.get("autotuner")
    value = shape.get("environment", {}).get(FLASHINFER_AUTOTUNE_ENV)
    if autotuner is not None and value is not None and value != ("1" if autotuner else "0"):
        out.error(
            f"{where}.environment.{FLASHINFER_AUTOTUNE_ENV}",
            f"{FLASHINFER_AUTOTUNE_ENV}={value} silently overrides autotuner: {str(autotuner).lower()} "
            "(seed 002 section 5.1: AutoTuner off is VLLM_FLASHINFER_AUTOTUNE '0')",
            found=value,
            expected=f'"{1 if autotuner else 0}", or leave it out: autotuner sets it',
        )
    # the serve arguments' own setting, as vLLM reads it: --enable-/--disable-/--no-enable-, any spelling, last wins
    from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.vllm import (  # at first use
        ServeArgv,
        serve_argv,
    )

    serve = serve_flags if isinstance(serve_flags, ServeArgv) else serve_argv(serve_flags)
    last = serve.last(AUTOTUNE_FLAG)
    if autotuner is not None and last is not None and serve.switch(AUTOTUNE_FLAG) != autotuner:
        out.error(
            f"{where}.autotuner",
            f"serve argument {last.flag} contradicts autotuner: {str(autotuner).lower()} (seed 002 section 5)",
            found=last.written,
            expected="one setting: the shape's autotuner",
        )
    components = budget.get("components_gib") or {}
    held, total = budget.get("held_gib"), budget.get("budget_gib")
    if autotuner is True:
        _check_autotuner_peak(budget, where, out)
    measured_kv = budget.get("kv_cache_from") == "memory.kv_cache_gib"
    if (
        components
        and total is not None
        and held is not None
        and AUTOTUNE_COMPONENT not in components
        and autotuner is not True
        and not measured_kv
    ):
        during = held + AUTOTUNE_PEAK_GIB
        out.warn(
            f"{where}.memory.components_gib",
            f"the DeepGEMM/CUTLASS autotune runs even with the FlashInfer AutoTuner off and takes ~10 GB while "
            f"vLLM profiles (seed 002 lesson 5); with it the rank holds {during:g} of its {total:g} GiB "
            f"budget during profiling"
            + (", more than the budget" if during > total else f", {total - during:.2f} GiB to spare")
            + _autotune_kv_cost(budget, during),
            expected=f"a '{AUTOTUNE_COMPONENT}' component of ~{AUTOTUNE_PEAK_GIB}, or a measured profiling peak",
        )


def _check_autotuner_peak(budget: Mapping[str, Any], where: str, out: Collector) -> None:
    """Seed 002 section 5.1 turns the AutoTuner off at 300K ('Voorkomt een OOM-piek'); section 5.2 keeps it on at 1M
    ('Voldoende geheugenreserve'). By meaning: the AutoTuner is on only where its ~10 GB peak (lesson 5) leaves the
    KV cache what the shape plans and one max_model_len sequence; without a budget to tell, not at 300K or less."""
    components = budget.get("components_gib") or {}
    held, total = budget.get("held_gib"), budget.get("budget_gib")
    words = (
        "seed 002 section 5.1 turns the AutoTuner off on its 300K shape ('Voorkomt een OOM-piek', it prevents an OOM "
        "peak) and keeps it on only at 1M, where the budget has the reserve (section 5.2, lesson 5: ~10 GB while "
        "vLLM profiles)"
    )
    if total is None or held is None or not components:
        if budget.get("max_model_len", SEED002_300K + 1) <= SEED002_300K:
            out.error(
                f"{where}.autotuner",
                f"autotuner: true on a shape of {budget['max_model_len']:,} tokens with no memory budget to show room "
                f"for its peak: {words}",
                found=True,
                expected=f"false, or a memory budget with an '{AUTOTUNE_COMPONENT}' component that fits",
                check="autotuner-off-at-300k",
            )
        return
    peak = 0.0 if AUTOTUNE_COMPONENT in components else float(AUTOTUNE_PEAK_GIB)
    left = total - held - peak
    planned = budget.get("kv_cache_gib")
    needed = budget.get("needed_for_max_model_len_gib")
    short: list[str] = []
    if planned is not None and left + 0.0005 < planned:
        short.append(f"the planned {planned:g} GiB KV cache")
    if needed is not None and left < needed:
        short.append(f"the {needed:.2f} GiB one max_model_len sequence needs")
    if budget.get("kv_cache_from") == "sizing.kv_cache_memory_bytes":
        short = short if left < 0 else []  # a fixed KV cache is allocated as given: only the peak itself must fit
    if left < 0 or short:
        out.error(
            f"{where}.autotuner",
            f"autotuner: true leaves {max(0.0, left):.2f} GiB of the {total:g} GiB budget after the rank's "
            f"{held:g} GiB"
            + (f" and the ~{AUTOTUNE_PEAK_GIB} GiB peak" if peak else " (its peak included)")
            + (", less than " + " and ".join(short) if short else ", less than nothing")
            + f": {words}",
            found=True,
            expected="false (seed 002 section 5.1: VLLM_FLASHINFER_AUTOTUNE '0'), or a budget with room for the peak",
            check="autotuner-off-at-300k",
        )


def check_nccl_in_budget(nodes: int, memory: Mapping[str, Any] | None, where: str, out: Collector) -> None:
    """Seed 002 lesson 1: at 8 ranks NCCL takes ~11 GB a rank even at 8 channels; a budget without it fits on paper."""
    if nodes < NCCL_BUDGET_RANKS:
        return
    components = (memory or {}).get("components_gib") or {}
    if any(name.startswith("nccl") for name in components):
        return
    out.warn(
        f"{where}.memory" + (".components_gib" if memory else ""),
        (
            f"the memory budget at {nodes} ranks has no NCCL component"
            if memory
            else f"no memory budget at {nodes} ranks"
        )
        + f": seed 002 lesson 1 measures NCCL at ~{NCCL_GIB_AT_8} GB per rank with NCCL_MAX_NCHANNELS=8 and 1 MiB "
        "buffers (~37 GB at the default 64 channels), 'zonder welke het model niet past' (without which the model "
        "does not fit); section 6 budgets it in both configurations",
        expected=f"memory.components_gib.nccl ~{NCCL_GIB_AT_8} (seed 002 sections 6.1 and 6.2)",
        check="nccl-in-budget",
    )


def _autotune_kv_cost(budget: Mapping[str, Any], during: float) -> str:
    """What the autotune's peak leaves the KV cache when vLLM sizes it from gpu_memory_utilization.

    vLLM gives the KV cache what its profiling run leaves of the budget, as seed 002 section 6.2 adds it up
    (model 38 + NCCL 11 + AutoTune peak 10 + CUDA graphs 1.5 = 60.5 of 90.75, KV ~30). A KV cache fixed by
    kv_cache_memory_bytes is allocated as given, so only the sum above applies to it."""
    kv, total = budget.get("kv_cache_gib"), budget["budget_gib"]
    if kv is None or budget.get("kv_cache_from") == "sizing.kv_cache_memory_bytes":
        return ""
    left = max(0.0, total - during)
    if left >= kv:
        return ""
    text = (
        f"; vLLM sizes this KV cache from what profiling leaves, so it would get {left:.2f} GiB, not the planned "
        f"{kv:g} GiB"
    )
    headroom = budget.get("headroom_gib")
    if headroom is not None:
        text += f" (the budget keeps {headroom:g} GiB beyond the KV cache, less than the peak)"
    needed = budget.get("needed_for_max_model_len_gib")
    if needed is not None and left < needed:
        text += (
            f", under the {needed:.2f} GiB one max_model_len sequence ({budget['max_model_len']:,} tokens) needs: "
            "vLLM would refuse to start unless that autotune is off"
        )
    return text


def check_usable_memory(memory: Mapping[str, Any] | None, where: str, out: Collector) -> None:
    """usable_gib is GiB, as vLLM, Docker and free count (docs/units.md); a GB figure overstates it ~7 %."""
    usable = (memory or {}).get("usable_gib")
    if usable is not None and usable > GB10_MEMTOTAL_GIB:
        out.error(
            f"{where}.memory.usable_gib",
            f"more than a GB10's kernel reports: MemTotal is {GB10_MEMTOTAL_GIB:.1f} GiB on the 64K-page kernel "
            "(121.7 on 4K pages); a figure in decimal GB, or the 128 GB of the data sheet, overstates it "
            "(docs/units.md: the seeds' GB are GiB, seed 002 section 4.2's 121)",
            found=usable,
            expected=f"<= {GB10_MEMTOTAL_GIB:.1f} (seed 002: 121)",
            check="usable-memory-gib",
        )


# ----------------------------------------------------------------------------- the model's KV cost


def model_kv_cost(
    data: Mapping[str, Any], nodes: int, kv_cache_dtype: str, where: str, out: Collector
) -> KVCost | None:
    """The KV cost per token per rank the profile's ``model_config`` gives, or None when it gives none."""
    model = data.get("model_config")
    if not model:
        return None
    if "kv_cache_bytes_per_token" in model:
        return KVCost(model["kv_cache_bytes_per_token"], formula="model_config.kv_cache_bytes_per_token (measured)")
    try:
        return kv_bytes_per_token(model, kv_cache_dtype, nodes)
    except ValueError as exc:
        out.error("$.model_config", f"cannot size the KV cache for {where}: {exc}", found=sorted(model))
        return None


def check_model_sources(data: Mapping[str, Any], out: Collector) -> None:
    """Every number of model_config cites its source, as the seeds' numbers do."""
    sources = data.get("sources", {})
    if "$.model_config" in sources:
        return
    for key in sorted(data.get("model_config", {})):
        if key != "architecture" and f"$.model_config.{key}" not in sources:
            out.error(
                f"$.model_config.{key}",
                "a model number without its source: say where it comes from (the weights' config.json, "
                "a vLLM log line)",
                expected=f'a sources entry "$.model_config.{key}"',
            )


def check_kv_plausible(budget: Mapping[str, Any], sizing: Mapping[str, Any], where: str, out: Collector) -> None:
    """Without model information, still refuse a KV cache no model could serve one sequence from."""
    kv = budget.get("kv_cache_gib")
    if kv is None:
        return
    length = sizing["max_model_len"]
    explicit = budget["kv_cache_from"] == "sizing.kv_cache_memory_bytes"
    # the profile's own bytes when it gives them (the budget's GiB are rounded: 2,252 bytes would read as 0)
    kv_bytes = sizing["kv_cache_memory_bytes"] if explicit else kv * GIB
    place = f"{where}.{'sizing.kv_cache_memory_bytes' if explicit else 'memory'}"
    missing = (
        "the KV cost per token is unknown: add model_config (the weights' config.json numbers) or "
        "memory.kv_cache_bytes_per_token (from vLLM's 'Available KV cache memory' / 'GPU KV cache size' lines)"
    )
    if kv_bytes < length * MIN_PLAUSIBLE_KV_BYTES_PER_TOKEN:
        out.error(
            place,
            f"a KV cache of {kv_bytes:,.0f} bytes per rank holds {int(kv_bytes // MIN_PLAUSIBLE_KV_BYTES_PER_TOKEN):,} "
            f"tokens even at {MIN_PLAUSIBLE_KV_BYTES_PER_TOKEN} bytes per token, less than one max_model_len "
            f"sequence ({length:,}); no model stores a token in less (seed 000's tp3-triangle holds a 1,048,576-token "
            "sequence in 2,362,232,012 bytes, 2,252 per token; seed 002 section 6: 3,789 and 6,398; vLLM's KV "
            "lines on Sparks: 7,359 and 7,786); was it written in KiB or MiB? " + missing,
            found=int(kv_bytes),
            expected=f">= {length * MIN_PLAUSIBLE_KV_BYTES_PER_TOKEN:,} bytes",
        )
    else:
        out.warn(
            place,
            f"the KV cache is checked only against a floor of {MIN_PLAUSIBLE_KV_BYTES_PER_TOKEN} bytes per token, "
            f"not against the model: {missing}",
        )
