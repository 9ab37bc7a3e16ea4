# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Timing tables per shape, taken from the seed documents.

A table gives, per concurrency level (requests running: admitted, prefilling or decoding), the
time to first token (TTFT, ms) and the inter-token latency (ITL, ms) of a short prompt. Between
levels values are interpolated linearly; beyond the last level they are extrapolated linearly from
the last two levels (so they keep degrading); below level 1 level 1 applies.

Prompts longer than ``SHORT_PROMPT_TOKENS`` add ``(prompt_tokens - SHORT_PROMPT_TOKENS) /
prefill_tokens_per_s`` seconds to the TTFT.
"""

from __future__ import annotations

import json

# Seed 002's benchmark (CordatusAI/llm-benchmark) used short prompts: their prefill is inside the table.
SHORT_PROMPT_TOKENS = 512

# Seed 000: a 443,223-token needle retrieval took 87.1 s on tp3-triangle. Minus the short-prompt TTFT
# (~0.27 s) and ~10 answer tokens at 18.55 ms: (443223 - 512) / 86.64 s = ~5110 tok/s of prefill.
# No seed measures prefill for the other shapes: the same rate is used for all (an assumption).
DEFAULT_PREFILL_TOKENS_PER_S = 5100.0


def _itl_from_tps(tps: float, ttft_ms: float) -> float:
    """Seed 002 section 8 gives TP4's TPS and TTFT only. In its TP8 tables TPS x latency = 129.7
    tokens on every row and latency = TTFT + 127 x ITL, so ITL = (129.7 / TPS - TTFT) / 127."""
    return round(((129.7 / tps) - ttft_ms / 1000.0) / 127.0 * 1000.0, 2)


SHAPES: dict[str, dict] = {
    "tp8-300k": {
        "source": "seed 002 section 7.1 (TP8-300K, Engram in memory; CordatusAI/llm-benchmark)",
        # concurrency: (TTFT ms, ITL ms)
        "levels": {1: (213.19, 26.67), 2: (279.55, 33.87), 4: (370.36, 48.16), 8: (488.22, 71.12)},
    },
    "tp8-1m": {
        "source": "seed 002 section 7.2 (TP8-1M, Engram on disk; CordatusAI/llm-benchmark)",
        "levels": {1: (198.54, 29.06), 2: (301.32, 35.92), 4: (400.58, 56.68), 8: (553.68, 82.54)},
    },
    "tp4": {
        "source": ("seed 002 sections 8.1 and 8.2 (TP4: TPS and TTFT; ITL derived from TPS, see _itl_from_tps)"),
        "levels": {
            1: (271.63, _itl_from_tps(29.48, 271.63)),
            2: (395.75, _itl_from_tps(21.32, 395.75)),
            4: (577.41, _itl_from_tps(13.09, 577.41)),
            8: (805.89, _itl_from_tps(8.79, 805.89)),
        },
    },
    "tp3": {
        "source": (
            "seed 000 'Measured operating figures' (tp3-triangle, max_num_seqs 4): 53.9 tok/s single stream and "
            "137.6 tok/s aggregate at 4, as decode rates (ITL = 1000 x c / aggregate). Its 6-request burst (123.2 "
            "tok/s) ran with max_num_seqs 4: 4 decode at once, then the other 2, so 6 / 123.2 s = ITL(4) + ITL(2) "
            "and ITL(2) = 48.70 - 29.07 = 19.63 ms. Seed 000 gives no TTFT: seed 002's TP4 TTFT figures are used "
            "(an assumption)."
        ),
        "levels": {
            1: (271.63, round(1000.0 / 53.9, 2)),
            2: (395.75, round(6000.0 / 123.2 - 4000.0 / 137.6, 2)),
            4: (577.41, round(4000.0 / 137.6, 2)),
        },
    },
}


def shape_for(world_size: int, max_model_len: int | None) -> str:
    """The table a rank uses when SIM_ENGINE_SHAPE is 'auto' (the default)."""
    if world_size <= 3:
        return "tp3"
    if world_size < 8:
        return "tp4"
    if max_model_len is not None and max_model_len > 300000:
        return "tp8-1m"
    return "tp8-300k"


def _interp(points: list[tuple[float, float]], c: float) -> float:
    if c <= points[0][0] or len(points) == 1:
        return points[0][1]
    for (c0, v0), (c1, v1) in zip(points, points[1:], strict=False):
        if c <= c1:
            return v0 + (v1 - v0) * (c - c0) / (c1 - c0)
    (c0, v0), (c1, v1) = points[-2], points[-1]
    return max(v1, v1 + (v1 - v0) * (c - c1) / (c1 - c0))


class Timing:
    """TTFT and ITL in seconds for a concurrency, already multiplied by the time scale."""

    def __init__(self, name: str, levels: dict, prefill_tokens_per_s: float, scale: float, source: str = ""):
        self.name = name
        self.source = source
        pts = sorted((float(c), (float(t), float(i))) for c, (t, i) in levels.items())
        self.ttft_points = [(c, v[0] / 1000.0) for c, v in pts]
        self.itl_points = [(c, v[1] / 1000.0) for c, v in pts]
        self.levels = {int(c): v for c, v in pts}
        self.prefill_tokens_per_s = prefill_tokens_per_s
        self.scale = scale

    def ttft(self, c: float) -> float:
        return _interp(self.ttft_points, c) * self.scale

    def itl(self, c: float) -> float:
        return _interp(self.itl_points, c) * self.scale

    def prefill_extra(self, prompt_tokens: int) -> float:
        extra = max(0, prompt_tokens - SHORT_PROMPT_TOKENS)
        return extra / self.prefill_tokens_per_s * self.scale


def load_custom(path: str) -> dict:
    """A JSON file {"levels": {"1": [ttft_ms, itl_ms], ...}, "prefill_tokens_per_s": 5100 (optional)}."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    levels = data.get("levels")
    if not isinstance(levels, dict) or not levels:
        raise ValueError(f"{path}: needs a non-empty 'levels' object: concurrency -> [ttft_ms, itl_ms]")
    out = {}
    for c, pair in levels.items():
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, (int, float)) for x in pair)):
            raise ValueError(f"{path}: levels[{c!r}] must be [ttft_ms, itl_ms]")
        if float(c) < 1 or pair[0] <= 0 or pair[1] <= 0:
            raise ValueError(f"{path}: levels[{c!r}]: concurrency >= 1 and positive times needed")
        out[float(c)] = (float(pair[0]), float(pair[1]))
    return {"levels": out, "prefill_tokens_per_s": data.get("prefill_tokens_per_s"), "source": path}
