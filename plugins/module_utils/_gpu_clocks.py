# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU clock-latch check: the SM clock under load against its maximum, from ``nvidia-smi --query-gpu``.

No Ansible imports, standard library only (node_facts and the bench's node monitor run it on the nodes;
the controller reads its verdicts).

Why: a GB10 can latch into a slow clock state and stay there under load until it loses AC power
(REFERENCE.md, "What goes wrong" 8; Blackwellboy/model-serving-minefield PR 55, "Trap 124: DGX Spark /
GB10 stuck low-power state under load": heavily utilised, it does not boost into the normal sustained
SM-clock range). The SM clock of an idle GPU says nothing (an idle H200 reads 345 of 1980 MHz, an idle
GB10 2522 of 3003 MHz: tests/unit/fixtures/gpu_clocks/), so a sample is judged only under load:
``utilization.gpu`` at least :data:`LOAD_MIN_UTILIZATION` %. Under load the SM clock must be at least
:data:`MIN_RATIO` of ``clocks.max.sm``: a healthy GB10 serving holds 2164-2190 MHz of 3003 (72-73 %,
tonyd2wild/DeepSeek-V4.1-Flash-vLLM-DGX-Spark issue 1), so 0.6 (1802 MHz on a GB10) leaves that margin
and still catches a clock that did not boost. Over several samples the median of the loaded samples is
judged, so one sample taken in a clock transition does not decide. The same issue shows a slow state that
nvidia-smi does not show at all (same SM clock, lower power): this check cannot see that one, and says so.
"""

from __future__ import annotations

from typing import Any, Sequence

MIN_RATIO = 0.6
LOAD_MIN_UTILIZATION = 50
PASS, LATCHED, NOT_JUDGED = "pass", "latched", "not_judged"
BLIND_SPOT = "a slow state with a normal SM clock (lower power only) is not visible to nvidia-smi"


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return float(ordered[middle]) if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2.0


def judge_gpu(
    samples: Sequence[dict[str, Any]],
    min_ratio: float = MIN_RATIO,
    min_utilization: float = LOAD_MIN_UTILIZATION,
) -> dict[str, Any]:
    """One GPU's verdict from its samples (node_facts' device dicts, oldest first).

    Returns ``index``, ``name``, ``samples``, ``loaded_samples`` (utilization >= ``min_utilization``),
    ``sm_mhz`` (the median SM clock of the loaded samples), ``max_sm_mhz``, ``ratio``, ``verdict``
    (``pass``, ``latched`` or ``not_judged``) and ``message``."""
    if not samples:
        raise ValueError("no sample of this GPU")
    last = samples[-1]
    found: dict[str, Any] = {
        "index": last.get("index"),
        "name": last.get("name"),
        "samples": len(samples),
        "loaded_samples": 0,
        "sm_mhz": None,
        "max_sm_mhz": None,
        "ratio": None,
        "verdict": NOT_JUDGED,
        "message": "",
    }
    maxima = [s.get("clocks_max_sm_mhz") for s in samples if s.get("clocks_max_sm_mhz")]
    if not maxima:
        found["message"] = "nvidia-smi gives no clocks.max.sm for this GPU: the clock cannot be judged"
        return found
    found["max_sm_mhz"] = max(maxima)
    loaded = [
        s
        for s in samples
        if s.get("utilization_gpu_pct") is not None
        and s["utilization_gpu_pct"] >= min_utilization
        and s.get("clocks_sm_mhz") is not None
    ]
    found["loaded_samples"] = len(loaded)
    if not loaded:
        utilization = [s.get("utilization_gpu_pct") for s in samples if s.get("utilization_gpu_pct") is not None]
        busiest = f"{max(utilization)} %" if utilization else "not reported"
        found["message"] = (
            f"not under load (utilization.gpu {busiest}, below {min_utilization:g} % in every sample): an idle SM "
            "clock says nothing; judge it while the model serves (bench.yml's node monitor does)"
        )
        return found
    sm = _median([s["clocks_sm_mhz"] for s in loaded])
    ratio = sm / found["max_sm_mhz"]
    found.update(sm_mhz=sm, ratio=round(ratio, 4))
    where = f"SM clock {sm:g} MHz of {found['max_sm_mhz']} MHz ({ratio:.0%}) over {len(loaded)} loaded sample(s)"
    if ratio < min_ratio:
        found["verdict"] = LATCHED
        found["message"] = (
            f"{where}: below {min_ratio:.0%} of the maximum under load, the GPU looks latched in a slow clock "
            "state; a reboot does not always clear it, a full power cycle (AC off) does"
        )
    else:
        found["verdict"] = PASS
        found["message"] = f"{where}: at least {min_ratio:.0%} of the maximum ({BLIND_SPOT})"
    return found


def judge_clock_latch(
    samples: Sequence[Sequence[dict[str, Any]]],
    min_ratio: float = MIN_RATIO,
    min_utilization: float = LOAD_MIN_UTILIZATION,
) -> dict[str, Any]:
    """Every GPU's verdict over a series of samples (each one ``nvidia-smi`` query: a list of devices).

    Returns ``verdict`` (``latched`` when any GPU is, else ``pass`` when any was judged, else
    ``not_judged``), ``gpus`` (:func:`judge_gpu` each, by index order), ``min_ratio``, ``min_utilization``
    and ``summary``, one line."""
    by_gpu: dict[Any, list[dict[str, Any]]] = {}
    for sample in samples:
        for device in sample:
            by_gpu.setdefault(device.get("index"), []).append(device)
    gpus = [judge_gpu(by_gpu[index], min_ratio, min_utilization) for index in sorted(by_gpu, key=_order)]
    verdicts = {gpu["verdict"] for gpu in gpus}
    verdict = LATCHED if LATCHED in verdicts else PASS if PASS in verdicts else NOT_JUDGED
    if not gpus:
        summary = "no GPU sample: the clock-latch check did not run"
    else:
        summary = "; ".join(f"GPU {gpu['index']} {gpu['verdict']}: {gpu['message']}" for gpu in gpus)
    return {
        "verdict": verdict,
        "gpus": gpus,
        "min_ratio": min_ratio,
        "min_utilization": min_utilization,
        "summary": summary,
    }


def _order(index: Any | None) -> Any:
    return (index is None, index if isinstance(index, int) else 0)
