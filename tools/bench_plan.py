#!/usr/bin/env python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How long validation and planning take: shipped profiles, and synthetic ones of 8, 64 and 1,000 ranks.

Prints, per case, the median of several runs of: loading and validating the profile, planning every
rank (render + agreement), and the whole action plugin as a task runs it. Cost per rank shows whether
planning grows linearly. Target (issue 2): an 8-rank plan well under 100 ms of plugin time.

Usage: tools/bench_plan.py [--repeat N]
"""

from __future__ import annotations

import argparse
import copy
import json
import pathlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any
from unittest.mock import MagicMock

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / ".ansible" / "collections"))

from ansible.parsing.dataloader import DataLoader  # noqa: E402
from ansible.playbook.play_context import PlayContext  # noqa: E402
from ansible.playbook.task import Task  # noqa: E402
from ansible.template import Templar  # noqa: E402

from ansible_collections.dgxspark.cluster.plugins.action.serving_profile import ActionModule  # noqa: E402
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import HEAD_GROUP, WORKERS_GROUP  # noqa: E402
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.plan import HostSpec, build_plan  # noqa: E402
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import load_profile  # noqa: E402


def median_ms(function: Callable[[], Any], repeat: int) -> float:
    function()  # warm caches and imports
    samples = []
    for _round in range(repeat):
        start = time.perf_counter()
        function()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def synthetic(ranks: int) -> dict[str, Any]:
    """Seed 002's TP8-300K shape, stretched to ``ranks`` nodes on a switch."""
    document = json.loads((ROOT / "inventories/spark8/serving-profile.json").read_text())
    shape = copy.deepcopy(document["shapes"]["tp8-300k"])
    shape["nodes"] = ranks
    document["shapes"] = {"synthetic": shape}
    document["default_shape"] = "synthetic"
    document["sources"] = {}
    return document


def hosts(ranks: int) -> list[HostSpec]:
    # 198.18.0.0/15 is the benchmarking range (RFC 2544): never a real host.
    return [HostSpec(f"node{i:04d}", i, i == 0, f"198.18.{i // 250}.{i % 250 + 1}") for i in range(ranks)]


def action_run(path: str, shape: str | None, spec: list[HostSpec]) -> Callable[[], Any]:
    hostvars = {h.name: {"dgxspark_rank": h.rank, "dgxspark_fabric_address": h.fabric_address} for h in spec}
    groups = {HEAD_GROUP: [spec[0].name], WORKERS_GROUP: [h.name for h in spec[1:]]}
    task_vars = {"hostvars": hostvars, "groups": groups, "ansible_play_hosts_all": list(hostvars)}

    def run() -> Any:
        task = MagicMock(Task)
        task.args = {"src": path, **({"shape": shape} if shape else {})}
        task.async_val, task.check_mode, task.diff = 0, False, False
        loader = DataLoader()
        action = ActionModule(
            task=task,
            connection=MagicMock(),
            play_context=PlayContext(),
            loader=loader,
            templar=Templar(loader=loader),
            shared_loader_obj=None,
        )
        result = action.run(task_vars=task_vars)
        if result.get("failed"):
            raise SystemExit(result["msg"])
        return result

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    cases: list[tuple[str, str, str | None, int]] = []
    for inventory, shapes in (("spark3", ("tp3-triangle", "tp4-ring")), ("spark8", ("tp8-300k", "tp8-1m"))):
        for shape in shapes:
            nodes = json.loads((ROOT / f"inventories/{inventory}/serving-profile.json").read_text())
            cases.append(
                (
                    f"{inventory}/{shape}",
                    str(ROOT / f"inventories/{inventory}/serving-profile.json"),
                    shape,
                    nodes["shapes"][shape]["nodes"],
                )
            )
    with tempfile.TemporaryDirectory() as tmp:
        for ranks in (8, 64, 1000):
            path = pathlib.Path(tmp) / f"synthetic-{ranks}.json"
            path.write_text(json.dumps(synthetic(ranks)))
            cases.append((f"synthetic-{ranks}", str(path), None, ranks))
        print(f"{'case':<22}{'ranks':>6}{'validate ms':>13}{'plan ms':>10}{'plan us/rank':>14}{'action ms':>11}")
        per_rank: dict[int, float] = {}
        for name, path, shape, ranks in cases:
            profile = load_profile(path)
            spec = hosts(ranks)
            repeat = max(3, args.repeat if ranks <= 64 else args.repeat // 5)
            validate_ms = median_ms(lambda p=path: load_profile(p), repeat)
            plan_ms = median_ms(lambda p=profile, s=shape, h=spec: build_plan(p, s, h), repeat)
            action_ms = median_ms(action_run(path, shape, spec), repeat)
            per_rank[ranks] = plan_ms / ranks
            print(
                f"{name:<22}{ranks:>6}{validate_ms:>13.2f}{plan_ms:>10.2f}{plan_ms / ranks * 1000:>14.1f}"
                f"{action_ms:>11.2f}"
            )
    growth = per_rank[1000] / per_rank[8]
    print(f"\nplan cost per rank, 1000 ranks vs 8 ranks: {growth:.2f}x (1.0 = linear)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
