# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The candidate's benchmark parameters in ``playbooks/promote.yml``: the promoted release's run's.

The candidate is judged against the promoted release's stored run, so its run must be the same workload: the
levels, the requests per level, the prompt and output tokens, the warm-up, the ramp, the bursts and their tokens,
the API, the needle and the SLOs. They are read from that run's results (``identity.workload``, ``needle``,
``slos``), never asked of the operator. A ``dgxspark_bench_*`` variable given (with -e, or in the inventory) that
differs from the stored run is refused, naming each, unless ``override`` is set: then the given values run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench import bench as _bench

OVERRIDE_VAR = "dgxspark_promote_bench_override"

# bench.yml's variable, and how the stored run keeps it: (section, key) of the results document; the kind
# given values are read as (-e key=value gives text).
PARAMETERS: dict[str, tuple[str, str, str]] = {
    "dgxspark_bench_levels": ("workload", "levels", "ints"),
    "dgxspark_bench_requests": ("workload", "requests_per_level", "int"),
    "dgxspark_bench_prompt_tokens": ("workload", "prompt_tokens", "int"),
    "dgxspark_bench_max_tokens": ("workload", "max_tokens", "int"),
    "dgxspark_bench_warmup": ("workload", "warmup_requests", "int"),
    "dgxspark_bench_ramp": ("workload", "ramp_s", "number"),
    "dgxspark_bench_bursts": ("workload", "bursts", "ints"),
    "dgxspark_bench_burst_max_tokens": ("workload", "burst_max_tokens", "int"),
    "dgxspark_bench_api": ("workload", "api", "str"),
    "dgxspark_bench_needle_tokens": ("needle", "requested_tokens", "int"),
    "dgxspark_bench_needle_depth": ("needle", "depth", "number"),
    "dgxspark_bench_slos": ("slos", "", "slos"),
}


def stored(results: Mapping[str, Any]) -> dict[str, Any]:
    """bench.yml's variables as the stored run had them; a parameter the run did not record is left out."""
    workload = (results.get("identity") or {}).get("workload") or {}
    found: dict[str, Any] = {}
    for name, (section, key, _kind) in PARAMETERS.items():
        if section == "workload" and key in workload:
            found[name] = workload[key]
        elif section == "needle":
            needle = results.get("needle")
            if needle is None and "levels" in workload:  # a run without the needle: it was skipped (0 tokens)
                if key == "requested_tokens":
                    found[name] = 0
            elif isinstance(needle, Mapping) and key in needle:
                found[name] = needle[key]
        elif section == "slos" and results.get("slos"):
            found[name] = _bench.parse_slos(results["slos"])
    return found


def _read(value: Any, kind: str) -> Any:
    """A given value as the stored run keeps it: -e key=value gives text, JSON/YAML gives numbers and lists."""
    if isinstance(value, str) and kind != "str":
        try:
            value = json.loads(value)
        except ValueError:
            return value
    if kind == "int" and isinstance(value, float) and value.is_integer():
        return int(value)
    if kind == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if kind == "ints" and isinstance(value, list):
        return [int(v) if isinstance(v, float) and v.is_integer() else v for v in value]
    if kind == "slos" and isinstance(value, list):
        try:
            return _bench.parse_slos(value)
        except ValueError:
            return value
    return value


def _same(given: Any, kept: Any, kind: str) -> bool:
    if kind == "slos":
        numbers = ("threshold", "percentile")
        norm = [[{k: float(v) if k in numbers else v for k, v in s.items()} for s in x] for x in (given, kept)]
        return all(isinstance(x, list) for x in (given, kept)) and norm[0] == norm[1]
    if kind == "number":
        return isinstance(given, float) and float(kept) == given
    return bool(given == kept)


def parameters(results: Mapping[str, Any], given: Mapping[str, Any], override: bool = False) -> dict[str, Any]:
    """The benchmark variables for the candidate's run (``vars``: the stored run's, or with ``override`` the given
    values where given), the given ones that differ from the stored run (``differ``: a line each), whether the run
    is refused (``refused``: something differs and no ``override``; ``refusal``, why), and a line saying where
    they come from."""
    kept = stored(results)
    chosen: dict[str, Any] = {}
    differ: list[str] = []
    for name, value in kept.items():
        kind = PARAMETERS[name][2]
        wanted = given.get(name)
        if wanted is None:
            chosen[name] = value
            continue
        read = _read(wanted, kind)
        if not _same(read, value, kind):
            differ.append(f"{name}: given {json.dumps(read, default=str)}, the promoted run's {json.dumps(value)}")
        chosen[name] = read if override else value
    source = (results.get("identity") or {}).get("started_at") or "?"
    line = f"the candidate's benchmark takes the promoted release's run's parameters (started {source}): " + ", ".join(
        f"{name.removeprefix('dgxspark_bench_')} {json.dumps(chosen[name])}" for name in chosen
    )
    if differ and override:
        line += f"; given values that differ run ({OVERRIDE_VAR}): " + "; ".join(differ)
    refused = bool(differ) and not override
    return {
        "vars": chosen,
        "differ": differ,
        "refused": refused,
        "refusal": refusal(differ) if refused else "",
        "line": line,
    }


def refusal(differ: list[str]) -> str:
    """Why promote.yml refuses given benchmark values that differ from the promoted run's."""
    return (
        "promote.yml compares the candidate's run with the promoted release's, so it runs the benchmark as that "
        f"run did; these values given differ from it: {'; '.join(differ)}. Leave them out (promote.yml reads them "
        f"from the stored run), or pass -e {OVERRIDE_VAR}=true to run with them anyway (a different prompt or max "
        "tokens makes the runs incomparable; fewer requests may leave the verdict inconclusive); nothing was touched"
    )
