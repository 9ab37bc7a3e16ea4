# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A synthetic MemAvailable curve of a healthy cold load on a GB10, shaped on seed 000's figures.

No real per-sample MemAvailable trace of a GB10 cold load is available, so the tests generate one from
the parameters below (see ../../fixtures/memguard/README.md): free memory starts at ~110 GiB, falls
while the weights load and settles at 8-12 GiB; on the way it dips under the 5 GiB startup floor again
and again (5 or 6 dips, one of 20-30 s, the others 3-12 s, each to 3.5-4.9 GiB), never for as long as
the 45 s grace and never near the 1 GiB emergency floor, with Gaussian jitter everywhere. The same seed
always gives the same curve (``random.Random(seed)``).

    python tests/unit/memguard/coldload_trace.py [SEED] > tests/unit/fixtures/memguard/cold-load-trace.csv
"""

from __future__ import annotations

import math
import random
import sys

GIB = 1024**3
STEP_S = 0.25  # one point per startup-phase sample
LOAD_S = 110.0  # the whole load, t = 0 .. LOAD_S
START_GIB = (108.0, 112.0)  # MemAvailable when the load starts
SETTLE_GIB = (8.0, 12.0)  # MemAvailable once loaded (seed 000's long-context minimum headroom was 6.8 GiB)
RAMP_S = (40.0, 70.0)  # from start to settled (smoothstep)
DIP_COUNT = (5, 6)
LONG_DIP_S = (20.0, 30.0)  # one long dip per load
SHORT_DIP_S = (3.0, 12.0)  # the others
DIP_GIB = (3.5, 4.9)  # how low a dip goes (under the 5 GiB startup floor, far above the 1 GiB emergency floor)
DIP_WINDOW_S = (4.0, 106.0)  # where dips may fall
MIN_GAP_S = 2.0  # recovered (over the floor) between two dips
JITTER_GIB = 0.15  # sigma, outside the dips
DIP_JITTER_GIB = 0.25  # sigma, inside a dip (clamped to DIP_GIB)
RECOVERED_MIN_GIB = 5.5  # outside the dips the curve never goes under this


def _draw_dips(rng: random.Random) -> list[tuple[float, float, float]]:
    count = rng.randint(*DIP_COUNT)
    durations = [rng.uniform(*LONG_DIP_S)] + [rng.uniform(*SHORT_DIP_S) for _dip in range(count - 1)]
    rng.shuffle(durations)
    spare = DIP_WINDOW_S[1] - DIP_WINDOW_S[0] - sum(durations) - (count - 1) * MIN_GAP_S
    assert spare >= 0, "the dips do not fit in the load"
    weights = [rng.random() for _weight in range(count + 1)]
    gaps = [spare * weight / sum(weights) for weight in weights]
    result = []
    t = DIP_WINDOW_S[0] + gaps[0]
    for index, duration in enumerate(durations):
        result.append((t, t + duration, rng.uniform(DIP_GIB[0] + 0.2, DIP_GIB[1] - 0.2)))
        t += duration + MIN_GAP_S + gaps[index + 1]
    return result


def dips(seed: int) -> list[tuple[float, float, float]]:
    """The dips of ``seed``'s load: (start_s, end_s, level_gib)."""
    return _draw_dips(random.Random(seed))


def trace(seed: int) -> list[tuple[float, int]]:
    """``seed``'s load as (t_s, MemAvailable bytes) every STEP_S, in whole kB as /proc/meminfo gives them."""
    rng = random.Random(seed)
    load_dips = _draw_dips(rng)
    start = rng.uniform(*START_GIB)
    settle = rng.uniform(*SETTLE_GIB)
    ramp = rng.uniform(*RAMP_S)
    points = []
    for index in range(int(LOAD_S / STEP_S) + 1):
        t = index * STEP_S
        dip = next((level for begin, end, level in load_dips if begin <= t < end), None)
        if dip is not None:
            gib = min(max(dip + rng.gauss(0, DIP_JITTER_GIB), DIP_GIB[0]), DIP_GIB[1])
        else:
            x = min(t / ramp, 1.0)
            smooth = x * x * (3 - 2 * x)
            gib = max(settle + (start - settle) * (1 - smooth) + rng.gauss(0, JITTER_GIB), RECOVERED_MIN_GIB)
        points.append((t, math.floor(gib * GIB / 1024) * 1024))
    return points


def csv_text(points: list[tuple[float, int]]) -> str:
    return "t_s,mem_available_bytes\n" + "".join(f"{t:.2f},{value}\n" for t, value in points)


if __name__ == "__main__":
    sys.stdout.write(csv_text(trace(int(sys.argv[1]) if len(sys.argv) > 1 else 0)))
