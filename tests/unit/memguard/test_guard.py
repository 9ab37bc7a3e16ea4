# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The memory guard's decisions (``Guard``), driven with a fake clock: ``sample(t)`` at the phase's interval,
MemAvailable from a trace, a fake ``stop()`` and a ``record()`` that keeps the decisions."""

from __future__ import annotations

import csv
import json
import pathlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

import coldload_trace
import pytest

GIB = 1024**3
FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
GB10_MEMINFO = FIXTURES / "node_facts" / "gb10" / "proc" / "meminfo"  # a real GB10's /proc/meminfo
TRACE_CSV = FIXTURES / "memguard" / "cold-load-trace.csv"
SEEDS = range(10)
HIGH = 60 * GIB


class Rig:
    """A Guard with a fake clock and fake I/O. ``mem`` and ``psi`` are values or functions of the time."""

    def __init__(self, memguard: ModuleType, settings: dict[str, Any], mem: Any = HIGH, psi: Any = None) -> None:
        self.config = memguard.Config(settings)
        self.now = 0.0
        self.mem = mem
        self.psi = psi
        self.psi_reads = 0
        self.stops: list[float] = []
        self.records: list[dict[str, Any]] = []
        self.notified: list[tuple[str, float]] = []
        self.guard = memguard.Guard(
            self.config, self._read_mem, self._read_psi, self._stop, self.records.append, self._notify
        )

    def _read_mem(self) -> int | None:
        return self.mem(self.now) if callable(self.mem) else self.mem

    def _read_psi(self) -> float | None:
        self.psi_reads += 1
        return self.psi(self.now) if callable(self.psi) else self.psi

    def _stop(self) -> dict[str, Any]:
        self.stops.append(self.now)
        return {"action": "stop", "ok": True, "status": 204, "outcome": "stopped"}

    def _notify(self, reason: str, now: float) -> list[dict[str, Any]]:
        self.notified.append((reason, now))
        return [{"host": "spark-b", "ok": True}]

    def at(self, t: float) -> dict[str, Any] | None:
        self.now = t
        return self.guard.sample(t)

    def run(self, start: float, end: float) -> list[dict[str, Any]]:
        """Sample from ``start`` to ``end`` (inclusive) at the current phase's interval; the decisions taken."""
        decisions = []
        t = start
        while t <= end + 1e-9:
            decision = self.at(t)
            if decision:
                decisions.append(decision)
            t = round(t + self.guard.interval(), 6)
        return decisions

    def decided(self, kind: str) -> list[dict[str, Any]]:
        return [record for record in self.records if record["decision"] == kind]


def below(t0: float, low: int | None, high: int = HIGH) -> Callable[[float], int | None]:
    """MemAvailable ``high`` before ``t0``, ``low`` from ``t0`` on."""
    return lambda t: low if t >= t0 else high


def low_runs(points: list[tuple[float, int]], floor: int, step: float) -> list[tuple[float, float, int]]:
    """The runs of consecutive samples under ``floor``: (first t, length in s, lowest value)."""
    runs: list[list[float]] = []
    for t, value in points:
        if value < floor:
            if runs and abs(runs[-1][1] - (t - step)) < 1e-9:
                runs[-1][1] = t
                runs[-1][2] = min(runs[-1][2], value)
            else:
                runs.append([t, t, value])
    return [(first, last - first + step, int(lowest)) for first, last, lowest in runs]


def replay(rig: Rig, points: list[tuple[float, int]]) -> None:
    """Feed a trace to the guard in the startup phase, one sample per point."""
    values = dict(points)
    rig.mem = lambda t: values[t]
    rig.guard.set_phase("startup", points[0][0])
    for t, _value in points:
        rig.at(t)


def read_csv(path: pathlib.Path) -> list[tuple[float, int]]:
    with path.open(encoding="ascii", newline="") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == ["t_s", "mem_available_bytes"]
        return [(float(row["t_s"]), int(row["mem_available_bytes"])) for row in reader]


# ----------------------------------------------------------------------------- 1. cold-load trace replay


@pytest.mark.parametrize("seed", SEEDS)
def test_cold_load_trace_has_the_documented_shape(seed: int) -> None:
    points = coldload_trace.trace(seed)
    runs = low_runs(points, 5 * GIB, coldload_trace.STEP_S)
    assert points[0][0] == 0 and points[-1][0] == pytest.approx(110)
    assert 105 * GIB <= points[0][1] <= 115 * GIB
    settled = [value for t, value in points if t >= 100 and not any(a <= t < a + n for a, n, _depth in runs)]
    assert 7.4 * GIB <= sum(settled) / len(settled) <= 12.6 * GIB
    assert len(runs) >= 5, runs
    for _first, length, lowest in runs:
        assert 3 <= length <= 30.25
        assert 3.5 * GIB - 1024 <= lowest < 5 * GIB
    assert min(value for _t, value in points) > 1 * GIB  # never near the emergency floor


@pytest.mark.parametrize("seed", SEEDS)
def test_cold_load_with_short_dips_never_trips_in_startup(memguard: ModuleType, settings: Callable, seed: int) -> None:
    rig = Rig(memguard, settings())
    replay(rig, coldload_trace.trace(seed))
    assert rig.decided("trip") == []
    assert rig.stops == []
    assert rig.guard.tripped is None
    assert rig.guard.phase == "startup"
    assert rig.guard.samples[-1]["t"] == pytest.approx(110)


@pytest.mark.parametrize("seed", SEEDS)
def test_without_a_grace_the_same_cold_load_is_killed(memguard: ModuleType, settings: Callable, seed: int) -> None:
    """Seed 000's ten false kills: what saves the load is the grace, not the trace."""
    rig = Rig(memguard, settings(startup={"grace_s": 0}))
    points = coldload_trace.trace(seed)
    replay(rig, points)
    first_low = low_runs(points, 5 * GIB, coldload_trace.STEP_S)[0][0]
    assert rig.stops == [first_low]
    [trip] = rig.decided("trip")
    assert trip["time"] == first_low
    assert "startup floor 5.00 GiB" in trip["reason"] and "grace 0 s" in trip["reason"]


def test_the_fixture_csv_is_the_generated_seed_0_trace() -> None:
    assert TRACE_CSV.read_text(encoding="ascii") == coldload_trace.csv_text(coldload_trace.trace(0))
    readme = (TRACE_CSV.parent / "README.md").read_text(encoding="utf-8")
    assert "synthetic" in readme and "ten false kills" in readme and "6.8 GiB" in readme


def test_replaying_the_fixture_csv(memguard: ModuleType, settings: Callable) -> None:
    points = read_csv(TRACE_CSV)
    assert len(points) == 441
    assert len(low_runs(points, 5 * GIB, 0.25)) >= 5
    rig = Rig(memguard, settings())
    replay(rig, points)
    assert rig.stops == [] and rig.decided("trip") == []

    no_grace = Rig(memguard, settings(startup={"grace_s": 0}))
    replay(no_grace, points)
    assert len(no_grace.stops) == 1 and len(no_grace.decided("trip")) == 1


# ----------------------------------------------------------------------------- 2. a sustained dip


PHASE_CASES = {
    # phase: (t0, the low value: under that phase's floor, over the emergency floor)
    "startup": (10.1, 4 * GIB),
    "steady": (11.0, 2 * GIB),
}


@pytest.mark.parametrize("phase", PHASE_CASES)
def test_a_sustained_dip_trips_once_after_the_grace(memguard: ModuleType, settings: Callable, phase: str) -> None:
    t0, low = PHASE_CASES[phase]
    rig = Rig(memguard, settings(), mem=below(t0, low))
    rig.guard.set_phase(phase, 0.0)
    spec = rig.config.phases[phase]
    grace, interval = spec.grace_s, spec.interval_s

    rig.run(0.0, t0 + grace + 2 * interval)
    [trip] = rig.decided("trip")
    assert t0 + grace <= trip["time"] <= t0 + grace + 2 * interval
    assert rig.stops == [trip["time"]]
    assert trip["host"] == "spark-a" and trip["phase"] == phase
    floor = f"{spec.floor_bytes / GIB:.2f} GiB"
    assert f"MemAvailable under the {phase} floor {floor}" in trip["reason"]
    assert f"grace {grace:g} s" in trip["reason"]
    assert trip["stop"] == {"action": "stop", "ok": True, "status": 204, "outcome": "stopped"}
    # the samples that led to it: the record keeps a whole grace period of them (and more), so every one
    # since the dip began is there, all low, the last the one that tripped
    samples = trip["samples"]
    dip = [sample for sample in samples if sample["t"] >= t0]
    assert rig.guard.samples.maxlen >= int(grace / interval) + 8
    assert len(dip) == int(grace / interval) + 1
    assert all(sample["low"] and sample["mem_available"] == low for sample in dip)
    assert samples[-1]["t"] == round(trip["time"], 3)
    assert rig.guard.tripped["reason"] == trip["reason"]
    assert rig.guard.state(trip["time"])["tripped"]["reason"] == trip["reason"]

    # tripped stays tripped, and acts no more
    after = rig.run(round(trip["time"] + interval, 6), trip["time"] + 10)
    assert after == []
    assert len(rig.stops) == 1 and len(rig.decided("trip")) == 1
    assert rig.guard.tripped is not None

    # clear: a new dip is judged from scratch and trips again after a whole grace
    cleared_at = rig.now + interval / 2
    state = rig.guard.clear(cleared_at)
    assert state["tripped"] is None and state["low_since"] is None
    [clear] = rig.decided("clear")
    assert clear["reason"] == "cleared" and clear["tripped"]["reason"] == trip["reason"]
    rig.run(rig.now + interval, cleared_at + grace + 2 * interval)
    assert len(rig.decided("trip")) == 2
    again = rig.decided("trip")[1]
    assert cleared_at + grace <= again["time"] <= cleared_at + grace + 2 * interval
    assert len(rig.stops) == 2
    assert rig.guard.phase == phase


@pytest.mark.parametrize(("interval", "grace"), [(2.0, 30.0), (2.0, 0.5), (0.25, 45.0)])
def test_scheduled_like_the_daemon_a_trip_comes_within_grace_and_one_interval(
    memguard: ModuleType, settings: Callable, interval: float, grace: float
) -> None:
    """The daemon samples at ``next_sample_at``: sooner than one interval on when a dip's grace runs out first."""
    rig = Rig(memguard, settings(steady={"interval_s": interval, "grace_s": grace}), mem=below(11.1, 2 * GIB))
    rig.guard.set_phase("steady", 0.0)
    t = 0.0
    while not rig.stops and t < 200:
        rig.at(t)
        t = rig.guard.next_sample_at(t)
    [trip] = rig.decided("trip")
    assert 11.1 + grace <= trip["time"] <= 11.1 + grace + interval


# ----------------------------------------------------------------------------- 3. unreadable meminfo


@pytest.mark.parametrize("phase", ["startup", "steady"])
def test_unreadable_meminfo_trips_after_the_grace(memguard: ModuleType, settings: Callable, phase: str) -> None:
    rig = Rig(memguard, settings(meminfo_path="/nowhere/meminfo"), mem=below(20.0, None))
    rig.guard.set_phase(phase, 0.0)
    spec = rig.config.phases[phase]
    rig.run(0.0, 20.0 + spec.grace_s + 2 * spec.interval_s)
    [trip] = rig.decided("trip")
    assert 20.0 + spec.grace_s <= trip["time"] <= 20.0 + spec.grace_s + 2 * spec.interval_s
    assert "MemAvailable unreadable (/nowhere/meminfo; counted as low)" in trip["reason"]
    assert trip["samples"][-1]["mem_available"] is None and trip["samples"][-1]["low"] is True
    assert len(rig.stops) == 1


def test_unreadable_meminfo_for_less_than_the_grace_does_not_trip(memguard: ModuleType, settings: Callable) -> None:
    rig = Rig(memguard, settings(), mem=lambda t: None if 20 <= t < 60 else HIGH)
    rig.guard.set_phase("startup", 0.0)
    rig.run(0.0, 100.0)
    assert rig.stops == []


def test_read_mem_available_missing_file(memguard: ModuleType, tmp_path: pathlib.Path) -> None:
    assert memguard.read_mem_available(str(tmp_path / "meminfo")) is None


def test_read_mem_available_real_gb10_meminfo(memguard: ModuleType, tmp_path: pathlib.Path) -> None:
    # the GB10's own file: "MemAvailable:   123387328 kB"
    assert memguard.read_mem_available(str(GB10_MEMINFO)) == 123387328 * 1024
    path = tmp_path / "meminfo"
    path.write_text(
        "MemTotal:       129798784 kB\nMemFree:          3145728 kB\nMemAvailable:    4718592 kB\n"
        "Buffers:          435584 kB\nCached:          2188544 kB\nHugePages_Total:       0\n",
        encoding="ascii",
    )
    assert memguard.read_mem_available(str(path)) == 4718592 * 1024 == int(4.5 * GIB)


def test_read_mem_available_without_the_line_or_garbled(memguard: ModuleType, tmp_path: pathlib.Path) -> None:
    path = tmp_path / "meminfo"
    path.write_text("MemTotal:       129798784 kB\nMemFree:          3145728 kB\n", encoding="ascii")
    assert memguard.read_mem_available(str(path)) is None
    path.write_text("MemAvailable:   lots kB\n", encoding="ascii")
    assert memguard.read_mem_available(str(path)) is None


# ----------------------------------------------------------------------------- 4. emergency floor


@pytest.mark.parametrize("phase", ["startup", "steady"])
@pytest.mark.parametrize("grace", [45, 1e6])
def test_under_the_emergency_floor_it_trips_at_once(
    memguard: ModuleType, settings: Callable, phase: str, grace: float
) -> None:
    rig = Rig(memguard, settings(startup={"grace_s": grace}, steady={"grace_s": grace}), mem=below(7.3, GIB // 2))
    rig.guard.set_phase(phase, 0.0)
    interval = rig.config.phases[phase].interval_s
    rig.run(0.0, 30.0)
    first_under = next(t for t in (i * interval for i in range(1000)) if t >= 7.3)
    assert rig.stops == [first_under]
    [trip] = rig.decided("trip")
    assert trip["time"] == first_under
    assert trip["reason"] == "emergency: MemAvailable 0.50 GiB under 1.00 GiB"


def test_the_emergency_floor_cuts_a_dip_short(memguard: ModuleType, settings: Callable) -> None:
    rig = Rig(memguard, settings(), mem=lambda t: HIGH if t < 10 else 4 * GIB if t < 20 else GIB - 1)
    rig.guard.set_phase("startup", 0.0)
    rig.run(0.0, 30.0)
    assert rig.stops == [20.0]
    assert rig.decided("trip")[0]["reason"].startswith("emergency:")


def test_at_the_emergency_floor_is_not_under_it(memguard: ModuleType, settings: Callable) -> None:
    rig = Rig(memguard, settings(), mem=below(10.0, GIB))
    rig.guard.set_phase("startup", 0.0)
    rig.run(0.0, 60.0)
    [trip] = rig.decided("trip")  # an ordinary low sample: judged with the grace
    assert trip["time"] == 55.0 and "grace 45 s" in trip["reason"]


# ----------------------------------------------------------------------------- 5. phase switches mid-dip


def test_startup_dip_over_the_steady_floor_ends_at_the_switch(memguard: ModuleType, settings: Callable) -> None:
    rig = Rig(memguard, settings(), mem=below(10.0, 4 * GIB))  # under 5 GiB (startup), over 3 GiB (steady)
    rig.guard.set_phase("startup", 0.0)
    rig.run(0.0, 30.0)
    assert rig.guard.low_since == 10.0
    rig.guard.set_phase("steady", 30.0)
    assert rig.guard.low_since == 10.0  # a dip is a dip: kept through the switch ...
    rig.run(30.0, 200.0)
    assert rig.guard.low_since is None  # ... and judged by the steady floor, which 4 GiB is over
    assert rig.stops == [] and rig.decided("trip") == []


def test_a_dip_under_both_floors_keeps_its_start_through_the_switch(memguard: ModuleType, settings: Callable) -> None:
    rig = Rig(memguard, settings(), mem=below(10.0, 2 * GIB))
    rig.guard.set_phase("startup", 0.0)
    rig.run(0.0, 49.75)
    assert rig.stops == []  # 39.75 s < the 45 s startup grace
    rig.guard.set_phase("steady", 50.0)
    rig.at(50.0)  # the daemon samples at once after a switch
    [trip] = rig.decided("trip")
    assert trip["time"] == 50.0  # 40 s since the dip began >= the 30 s steady grace
    assert "steady floor 3.00 GiB" in trip["reason"] and "for 40.00 s (grace 30 s, phase steady)" in trip["reason"]
    assert rig.stops == [50.0]


def test_switching_to_idle_ends_the_dip(memguard: ModuleType, settings: Callable) -> None:
    rig = Rig(memguard, settings(), mem=below(10.0, 4 * GIB))
    rig.guard.set_phase("startup", 0.0)
    rig.run(0.0, 30.0)
    rig.guard.set_phase("idle", 30.0)
    assert rig.guard.low_since is None
    rig.mem = GIB // 2  # idle never acts, not even under the emergency floor
    rig.run(30.0, 200.0)
    assert rig.stops == [] and rig.guard.low_since is None
    # back to startup: the dip is judged from the switch, not from t=10
    rig.mem = 4 * GIB
    rig.guard.set_phase("startup", 200.0)
    rig.run(200.0, 244.75)
    assert rig.stops == []
    rig.run(245.0, 246.0)
    assert rig.stops == [245.0]


def test_phase_commands(memguard: ModuleType, settings: Callable) -> None:
    rig = Rig(memguard, settings())
    state = rig.guard.set_phase("startup", 3.0)
    assert state["phase"] == "startup" and state["phase_since"] == 3.0
    assert state["phase_settings"] == {"floor_bytes": 5 * GIB, "interval_s": 0.25, "grace_s": 45.0}
    assert rig.decided("phase")[-1]["reason"] == "idle -> startup"
    with pytest.raises(ValueError, match="unknown phase 'loading'"):
        rig.guard.set_phase("loading", 4.0)
    assert rig.guard.phase == "startup"
    assert rig.guard.interval() == 0.25
    rig.guard.set_phase("idle", 5.0)
    assert rig.guard.interval() == memguard.IDLE_INTERVAL


# ----------------------------------------------------------------------------- 6. startup overdue


def test_a_slow_startup_is_recorded_overdue_and_continues_as_steady(memguard: ModuleType, settings: Callable) -> None:
    rig = Rig(memguard, settings(), mem=8 * GIB)
    rig.guard.set_phase("startup", 0.0)
    rig.run(0.0, 120.0)
    assert rig.decided("startup-overdue") == [] and rig.guard.phase == "startup"
    decision = rig.at(120.25)
    assert decision is not None and decision["decision"] == "startup-overdue"
    assert decision["reason"] == "the startup phase outlasted 120 s: judged as steady from now on"
    assert rig.decided("startup-overdue") == [decision]
    assert rig.guard.phase == "steady" and rig.guard.startup_overdue is True
    assert rig.guard.interval() == 2.0
    state = rig.guard.state(120.25)
    assert state["phase"] == "steady" and state["startup_overdue"] is True and state["phase_since"] == 120.25
    rig.run(122.25, 400.0)
    assert rig.stops == [] and len(rig.decided("startup-overdue")) == 1


def test_overdue_mid_dip_is_judged_by_the_steady_floor(memguard: ModuleType, settings: Callable) -> None:
    """A slow load is not killed for being slow: 4 GiB is low for startup, fine for steady."""
    rig = Rig(memguard, settings(), mem=below(100.0, 4 * GIB))
    rig.guard.set_phase("startup", 0.0)
    rig.run(0.0, 200.0)
    assert rig.guard.startup_overdue is True and rig.stops == []


# ----------------------------------------------------------------------------- 7. PSI


def test_memory_pressure_counts_as_low(memguard: ModuleType, settings: Callable) -> None:
    rig = Rig(memguard, settings(psi_full_avg10_max=40), psi=lambda t: 40.0 if t >= 10 else 39.9)
    rig.guard.set_phase("steady", 0.0)
    rig.run(0.0, 50.0)
    [trip] = rig.decided("trip")
    assert trip["time"] == 40.0
    assert trip["reason"] == "memory pressure full avg10 40 % at or over 40 % for 30.00 s (grace 30 s, phase steady)"
    assert trip["samples"][-1]["psi_full_avg10"] == 40.0


def test_memory_pressure_under_the_limit_or_unknown_is_ignored(memguard: ModuleType, settings: Callable) -> None:
    rig = Rig(memguard, settings(psi_full_avg10_max=40), psi=39.9)
    rig.guard.set_phase("steady", 0.0)
    rig.run(0.0, 100.0)
    rig.psi = None  # no /proc/pressure/memory
    rig.run(102.0, 200.0)
    assert rig.stops == [] and rig.psi_reads > 0


def test_without_a_psi_limit_psi_is_not_read(memguard: ModuleType, settings: Callable) -> None:
    rig = Rig(memguard, settings(), psi=100.0)
    rig.guard.set_phase("steady", 0.0)
    rig.run(0.0, 100.0)
    assert rig.stops == [] and rig.psi_reads == 0
    assert rig.guard.samples[-1]["psi_full_avg10"] is None


def test_read_psi_full_avg10(memguard: ModuleType, tmp_path: pathlib.Path) -> None:
    path = tmp_path / "memory"
    path.write_text(
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=12.34 avg60=5.67 avg300=1.20 total=987654\n",
        encoding="ascii",
    )
    assert memguard.read_psi_full_avg10(str(path)) == 12.34
    assert memguard.read_psi_full_avg10(str(tmp_path / "missing")) is None
    path.write_text("some avg10=3.00 avg60=0.00 avg300=0.00 total=0\n", encoding="ascii")
    assert memguard.read_psi_full_avg10(str(path)) is None


# ----------------------------------------------------------------------------- 8. configuration


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"phases": {}}, "phases.startup: missing"),
        ({"phases": {"startup": {"floor_bytes": GIB, "interval_s": 1, "grace_s": 1}}}, "phases.steady"),
        ({"emergency_floor_bytes": 3 * GIB}, "emergency_floor_bytes"),
        ({"emergency_floor_bytes": 4 * GIB}, "emergency_floor_bytes"),
        ({"peers": [{"host": "spark-b", "address": "10.0.0.2", "port": 7391}]}, "peer_key"),
        ({"peers": [{"host": "b", "address": "10.0.0.2", "port": 1}], "peer_key": "fifteen-chars!!"}, "peer_key"),
        ({"peer_listen": {"address": "0.0.0.0", "port": 7391}}, "peer_key"),
        ({"cluster_policy": "stop-some"}, "cluster_policy"),
        ({"startup_wait_s": "120"}, "startup_wait_s"),
        ({"steady": {"interval_s": 0}}, "interval_s"),
        ({"psi_full_avg10_max": True}, "psi_full_avg10_max"),
    ],
)
def test_bad_configurations_are_refused(
    memguard: ModuleType, settings: Callable, changes: dict[str, Any], key: str
) -> None:
    with pytest.raises(ValueError, match=key):
        memguard.Config(settings(**changes))


def test_a_negative_grace_is_refused(memguard: ModuleType, settings: Callable) -> None:
    """BUG: grace_s is read with number(..., positive=False), which lets any negative number through
    (meant: not negative). A grace of -1 s is taken, and trips at the first low sample like a grace of
    0: seed 000's false kills."""
    with pytest.raises(ValueError, match="grace_s"):
        memguard.Config(settings(startup={"grace_s": -1}))


def test_a_good_configuration(memguard: ModuleType, settings: Callable) -> None:
    config = memguard.Config(
        settings(
            peers=[{"host": "spark-b", "address": "10.0.0.2", "port": 7391}],
            peer_key="k" * 16,
            cluster_policy="stop-all",
            startup={"grace_s": 0},
        )
    )
    assert config.phases["startup"].as_dict() == {"floor_bytes": 5 * GIB, "interval_s": 0.25, "grace_s": 0.0}
    assert config.phases["steady"].as_dict() == {"floor_bytes": 3 * GIB, "interval_s": 2.0, "grace_s": 30.0}
    assert config.startup_wait_s == 120 and config.emergency_floor_bytes == GIB
    assert config.psi_full_avg10_max is None and config.container == "vllm_dsv41"


@pytest.mark.parametrize(
    "peer",
    [
        {"host": "spark-b", "port": 7391},
        {"host": "spark-b", "address": "10.0.0.2"},
        {"address": "10.0.0.2", "port": "x"},
    ],
    ids=["no-address", "no-port", "bad-port"],
)
def test_a_peer_without_address_or_port_is_refused(memguard: ModuleType, settings: Callable, peer: dict) -> None:
    """BUG: Config takes such a peer. At the first trip, send_to_peers (``peer["address"]``,
    ``int(peer["port"])``) raises KeyError/ValueError out of Guard.trip after stop() but before record():
    the trip is neither logged nor persisted, and the exception ends the daemon's loop."""
    with pytest.raises(ValueError, match="peers"):
        memguard.Config(settings(peers=[peer], peer_key="k" * 16, cluster_policy="stop-all"))


# ----------------------------------------------------------------------------- 9. peers


KEY = "a-shared-key-of-40-characters-0123456789"


def test_peer_message_round_trip(memguard: ModuleType) -> None:
    raw = memguard.peer_message(KEY, "spark-a", "MemAvailable under the steady floor", 1000.5)
    assert raw.endswith(b"\n")
    message = memguard.check_peer_message(KEY, raw, 1010.0)
    nonce = message.pop("nonce")  # a fresh random one in every message: a replay is refused
    assert isinstance(nonce, str) and len(nonce) == 32 and int(nonce, 16) >= 0
    assert message == {
        "type": "peer-trip",
        "from": "spark-a",
        "reason": "MemAvailable under the steady floor",
        "time": 1000.5,
    }
    assert json.loads(memguard.peer_message(KEY, "spark-a", "x", 1000.5))["nonce"] != json.loads(raw)["nonce"]


def _tampered(raw: bytes, **changes: Any) -> bytes:
    message = json.loads(raw)
    message.update(changes)
    return json.dumps(message).encode()


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda m: _tampered(m.peer_message(KEY, "spark-a", "x", 1000.0), reason="stop everything"), "bad signature"),
        (lambda m: _tampered(m.peer_message(KEY, "spark-a", "x", 1000.0), **{"from": "spark-c"}), "bad signature"),
        (lambda m: m.peer_message("another-key-of-sixteen+", "spark-a", "x", 1000.0), "bad signature"),
        (lambda m: _tampered(m.peer_message(KEY, "spark-a", "x", 1000.0), mac=None), "bad signature"),
        (lambda m: m.peer_message(KEY, "spark-a", "x", 1000.0 - 121), "stale or undated"),
        (lambda m: m.peer_message(KEY, "spark-a", "x", 1000.0 + 121), "stale or undated"),
        (lambda m: b"hello\n", "not JSON"),
        (lambda m: b"\xff\xfe\n", "not JSON"),
        (lambda m: b"[1, 2]\n", "not a JSON object"),
    ],
    ids=["tampered-reason", "tampered-from", "wrong-key", "no-mac", "stale", "future", "text", "bytes", "list"],
)
def test_bad_peer_messages_are_refused(memguard: ModuleType, make: Callable, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        memguard.check_peer_message(KEY, make(memguard), 1000.0)


def test_a_signed_message_of_another_type_is_refused(memguard: ModuleType) -> None:
    body = {"type": "peer-clear", "from": "spark-a", "reason": "x", "time": 1000.0}
    raw = json.dumps({**body, "mac": memguard.sign(KEY, body)}).encode()
    with pytest.raises(ValueError, match="unknown type 'peer-clear'"):
        memguard.check_peer_message(KEY, raw, 1000.0)


@pytest.mark.parametrize(
    "raw",
    [b'{"type": "peer-trip", "mac": "\\u00e9"}\n', b'{"mac": "\xc3\xa9"}\n', b"[" * 60000 + b"\n"],
    ids=["non-ascii-mac-escaped", "non-ascii-mac-utf8", "deeply-nested"],
)
def test_hostile_peer_input_is_refused_with_a_value_error(memguard: ModuleType, raw: bytes) -> None:
    """BUG: anyone who reaches the peer port can send these (no key needed). check_peer_message must
    refuse them with ValueError, the only error Daemon.handle_peer catches besides OSError. Instead
    hmac.compare_digest(str(mac), ...) raises TypeError on a non-ASCII mac ("comparing strings with
    non-ASCII characters is not supported") and json.loads raises RecursionError on deep nesting: both
    escape handle_peer and end the daemon's loop, so the node is no longer guarded."""
    with pytest.raises(ValueError):
        memguard.check_peer_message(KEY, raw, 1000.0)


def _peered(settings: Callable, **changes: Any) -> dict[str, Any]:
    peered = {
        "peers": [{"host": "spark-b", "address": "10.0.0.2", "port": 7391}],
        "peer_key": KEY,
        "cluster_policy": "stop-all",
    }
    return settings(**{**peered, **changes})


def test_a_local_trip_tells_the_peers_once(memguard: ModuleType, settings: Callable) -> None:
    rig = Rig(memguard, _peered(settings), mem=below(10.0, 2 * GIB))
    rig.guard.set_phase("steady", 0.0)
    rig.run(0.0, 100.0)
    [trip] = rig.decided("trip")
    assert rig.notified == [(trip["reason"], trip["time"])]
    assert trip["peers"] == [{"host": "spark-b", "ok": True}]
    assert trip["from_peer"] is None


def test_a_trip_from_a_peer_is_not_passed_on(memguard: ModuleType, settings: Callable) -> None:
    rig = Rig(memguard, _peered(settings))
    decision = rig.guard.trip("peer spark-b tripped: emergency", 5.0, from_peer="spark-b")
    assert decision["decision"] == "trip" and decision["from_peer"] == "spark-b" and "peers" not in decision
    assert rig.notified == [] and rig.stops == [0.0]
    assert rig.guard.tripped["from_peer"] == "spark-b"
    # a second one (another peer, or a local dip) finds it tripped: no second stop, no record of a trip
    again = rig.guard.trip("peer spark-c tripped", 6.0, from_peer="spark-c")
    assert again["decision"] == "already-tripped"
    assert len(rig.stops) == 1 and len(rig.decided("trip")) == 1


@pytest.mark.parametrize(
    "changes",
    [{"cluster_policy": "local"}, {"peers": []}],
    ids=["policy-local", "no-peers"],
)
def test_no_peers_told_under_policy_local_or_without_peers(
    memguard: ModuleType, settings: Callable, changes: dict[str, Any]
) -> None:
    rig = Rig(memguard, _peered(settings, **changes), mem=below(10.0, 2 * GIB))
    rig.guard.set_phase("steady", 0.0)
    rig.run(0.0, 100.0)
    assert len(rig.decided("trip")) == 1 and rig.notified == []
    assert "peers" not in rig.decided("trip")[0]


# ----------------------------------------------------------------------------- after review


def test_the_overdue_flag_stays_until_the_next_load(memguard: ModuleType, settings: Callable) -> None:
    """The boot playbook reads startup_overdue after it switched to steady: the switch must not erase it."""
    rig = Rig(memguard, settings(), mem=8 * GIB)
    rig.guard.set_phase("startup", 0.0)
    rig.run(0.0, 121.0)
    assert rig.guard.startup_overdue is True
    rig.guard.set_phase("steady", 122.0)
    assert rig.guard.state(122.0)["startup_overdue"] is True
    rig.guard.set_phase("idle", 130.0)
    assert rig.guard.startup_overdue is True
    rig.guard.set_phase("startup", 140.0)  # a new load starts with a clean slate
    assert rig.guard.startup_overdue is False


def test_how_long_the_load_took_is_kept_until_the_next_load(memguard: ModuleType, settings: Callable) -> None:
    """An overdue load runs on as steady; the boot's own switch to steady (a no-op before) now ends it, and the
    state says how long its startup ran, for the boot report and the next preflight."""
    rig = Rig(memguard, settings(), mem=8 * GIB)
    assert rig.guard.state(0.0)["startup_seconds"] is None  # no load yet
    rig.guard.set_phase("startup", 10.0)
    rig.run(10.0, 100.0)
    assert rig.guard.state(100.0)["startup_seconds"] == 90.0  # still loading: counted to now
    rig.run(100.25, 190.0)
    assert rig.guard.startup_overdue is True and rig.guard.phase == "steady" and rig.stops == []
    assert rig.guard.state(190.0)["startup_seconds"] == 180.0  # overdue, still loading: still counting
    state = rig.guard.set_phase("steady", 197.5)  # the boot: the rank serves
    assert state["startup_overdue"] is True and state["startup_seconds"] == 187.5
    assert rig.decided("phase")[-1]["reason"] == "steady -> steady"
    assert rig.decided("phase")[-1]["startup_seconds"] == 187.5
    assert rig.guard.state(500.0)["startup_seconds"] == 187.5  # the load ended: fixed
    rig.guard.set_phase("steady", 510.0)  # asked again: nothing changes, nothing recorded
    assert len(rig.decided("phase")) == 2 and rig.guard.state(510.0)["startup_seconds"] == 187.5
    rig.guard.set_phase("startup", 600.0)  # the next load
    assert rig.guard.state(600.0)["startup_overdue"] is False and rig.guard.state(605.0)["startup_seconds"] == 5.0


def test_a_load_on_time_ends_with_the_switch_to_steady(memguard: ModuleType, settings: Callable) -> None:
    rig = Rig(memguard, settings(), mem=8 * GIB)
    rig.guard.set_phase("startup", 0.0)
    rig.run(0.0, 60.0)
    assert rig.guard.set_phase("steady", 61.25)["startup_seconds"] == 61.25
    assert rig.decided("phase")[-1]["reason"] == "startup -> steady"
    assert rig.guard.state(300.0) | {"startup_overdue": False, "startup_seconds": 61.25} == rig.guard.state(300.0)
    rig.guard.set_phase("startup", 400.0)
    assert rig.guard.set_phase("startup", 401.0)["startup_seconds"] == 1.0  # already there: nothing recorded
    assert [d["reason"] for d in rig.decided("phase")] == ["idle -> startup", "startup -> steady", "steady -> startup"]


def test_a_failed_stop_is_tried_again_and_nothing_else(memguard: ModuleType, settings: Callable) -> None:
    rig = Rig(memguard, settings(), mem=lambda t: 2 * GIB if t >= 10 else HIGH)
    answers = [
        {"action": "stop", "ok": False, "error": "stop: [Errno 111] Connection refused; kill: refused"},
        {"action": "stop", "ok": False, "error": "stop: refused; kill: refused"},
        {"action": "stop", "ok": True, "status": 204, "outcome": "stopped"},
    ]

    def stop() -> dict[str, Any]:
        rig.stops.append(rig.now)
        return answers[min(len(rig.stops) - 1, len(answers) - 1)]

    rig.guard.stop = stop
    rig.guard.set_phase("steady", 0.0)
    rig.run(0.0, 80.0)
    assert rig.stops[0] == 40.0  # the trip
    # retried every STOP_RETRY_S at the samples (2 s apart) until the engine answered, then never again
    assert rig.stops == [40.0, 46.0, 52.0]
    retries = rig.decided("stop-retry")
    assert [r["stop"]["ok"] for r in retries] == [False, True]
    assert rig.guard.tripped["stop"]["ok"] is True and len(rig.decided("trip")) == 1


def test_the_record_keeps_a_whole_startup_grace_of_samples(memguard: ModuleType, settings: Callable) -> None:
    rig = Rig(memguard, settings(), mem=lambda t: 2 * GIB if t >= 5 else HIGH)
    rig.guard.set_phase("startup", 0.0)
    rig.run(0.0, 60.0)
    [trip] = rig.decided("trip")
    assert trip["time"] == 50.0
    low = [sample for sample in trip["samples"] if sample["low"]]
    assert len(low) == 181 and low[0]["t"] == 5.0  # 45 s at 0.25 s, from the dip's first sample


def test_the_phase_it_is_in_already_changes_nothing(memguard: ModuleType, settings: Callable) -> None:
    rig = Rig(memguard, settings(), mem=lambda t: 2 * GIB if t >= 10 else HIGH)
    rig.guard.set_phase("steady", 0.0)
    rig.run(0.0, 20.0)
    low_since = rig.guard.low_since
    rig.guard.set_phase("steady", 20.0)  # a dip keeps its start: re-asking does not restart the grace
    assert rig.guard.low_since == low_since and rig.guard.phase_since == 0.0
    assert len(rig.decided("phase")) == 1
