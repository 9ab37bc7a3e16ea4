# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/benchmark.md's "Seed 000's figures, and the stand-in's" table (the README's until issue 25) against where
each of its numbers comes from.

- the seed column: seed 000's "Measured operating figures", as ``_bench_seed.SEED_000`` holds them (the bench's
  own comparison reads them from there);
- the calibration figures: the stand-in engine's tp3 table and prefill rate (sim/engine/vllm_sim/calibration.py);
- the measured stand-in values: sim/engine/README.md, "Timing", where they were measured and written down;
- the bounds: tests/sim/cluster/test_sim3.py::test_bench_reproduces_seed_000_on_sim3, which checks them on sim3.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from types import ModuleType

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench.seed import SEED_000, SEED_NEEDLE_TOKENS
from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT

HEADER = "| figure | seed 000 | the stand-in's value | how it is measured |"
ENGINE_README = (ROOT / "sim/engine/README.md").read_text()
SIM3 = ROOT / "tests/sim/cluster/test_sim3.py"


def _rows() -> list[list[str]]:
    lines = (ROOT / "docs" / "benchmark.md").read_text().splitlines()
    start = lines.index(HEADER) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def _calibration() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vllm_sim_calibration", ROOT / "sim/engine/vllm_sim/calibration.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sim_bounds() -> dict[str, tuple[float, float]]:
    """The ``bounds`` dict of the sim test that checks the stand-in's figures against the seed's."""
    tree = ast.parse(SIM3.read_text())
    test = next(
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name == "test_bench_reproduces_seed_000_on_sim3"
    )
    assign = next(
        node
        for node in ast.walk(test)
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "bounds"
    )
    return ast.literal_eval(assign.value)


ROWS = _rows()
BY_FIGURE = dict(zip([figure["figure"] for figure in SEED_000], ROWS, strict=True))


def _number(value: float) -> str:
    return f"{value:g}" if value < 1000 else f"{value:,.0f}"


def test_one_row_per_seed_figure_with_the_seeds_value() -> None:
    assert len(ROWS) == len(SEED_000)
    for figure, row in zip(SEED_000, ROWS, strict=True):
        assert row[0].split(" (")[0].lower() == figure["label"].split(" (")[0].lower(), (row[0], figure["label"])
        assert row[1] == f"{_number(figure['seed'])} {figure['unit']}", (row[1], figure)
    assert ROWS[3][0].startswith(f"{SEED_NEEDLE_TOKENS:,}-token needle")


def _ratio(value: float) -> str:
    """A bound as the table writes it: 0.95, 1.02, 1.0."""
    text = f"{value:.2f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


@pytest.mark.parametrize("figure", ["single_stream_tps", "burst_4_tps", "burst_6_tps", "needle_seconds"])
def test_every_compared_figure_states_the_sim_tests_bound(figure: str) -> None:
    low, high = _sim_bounds()[figure]
    assert f"sim test bound {_ratio(low)}-{_ratio(high)} x seed" in BY_FIGURE[figure][2], BY_FIGURE[figure][2]


def test_the_calibration_figures_are_the_engines() -> None:
    calibration = _calibration()
    tp3 = calibration.SHAPES["tp3"]["levels"]
    ttft_1, itl_1 = tp3[1]
    assert f"1 / {itl_1:.2f} ms" in BY_FIGURE["single_stream_tps"][2]
    assert f"{round(1000 / itl_1, 1):g} tok/s" in BY_FIGURE["single_stream_tps"][2]
    assert f"{tp3[4][1]:.2f} ms a token at 4" in BY_FIGURE["burst_4_tps"][2]
    assert f"{tp3[4][1]:.2f} ms a token at 4, {tp3[2][1]:.2f} ms at 2" in BY_FIGURE["burst_6_tps"][2]
    needle = BY_FIGURE["needle_seconds"][2]
    rate = calibration.DEFAULT_PREFILL_TOKENS_PER_S
    short = calibration.SHORT_PROMPT_TOKENS
    before_answer = (SEED_NEEDLE_TOKENS - short) / rate + ttft_1 / 1000
    assert (
        f"({SEED_NEEDLE_TOKENS:,} - {short}) / {rate:,.0f} tok/s of prefill + TTFT {ttft_1:.2f} ms = "
        f"{before_answer:.2f} s before the answer's tokens at {itl_1:.2f} ms each"
    ) in needle


def test_the_measured_values_are_where_they_were_measured() -> None:
    """A measured stand-in value must be written down in sim/engine/README.md (no figure without its run)."""
    timing = ENGINE_README[ENGINE_README.index("## Timing") : ENGINE_README.index("## Memory, stop")]
    for figure in ("burst_4_tps", "burst_6_tps"):
        measured = re.match(r"(\d+\.\d-\d+\.\d) tok/s", BY_FIGURE[figure][2])
        assert measured and f"{measured.group(1)} tok/s" in timing, (figure, BY_FIGURE[figure][2])
    needle = re.match(r"(\d+\.\d) s for a ([\d,]+)-token prompt", BY_FIGURE["needle_seconds"][2])
    assert needle, BY_FIGURE["needle_seconds"][2]
    assert f"A {needle.group(2)}-token needle prompt on tp3 answered correctly in {needle.group(1)} s" in " ".join(
        timing.split()
    )
    low, high = _sim_bounds()["needle_seconds"]
    assert low <= float(needle.group(1)) / 87.1 <= high  # the measured run is inside the sim test's bound


def test_the_headroom_is_not_given_a_value_the_stand_in_cannot_have() -> None:
    """The simulated nodes share one machine's memory: no stand-in value is claimed for seed 000's 6.8 GiB."""
    cell = BY_FIGURE["needle_min_headroom_gib"][2]
    assert cell.startswith("none comparable") and "GiB" not in cell.replace("0 GiB", "")
