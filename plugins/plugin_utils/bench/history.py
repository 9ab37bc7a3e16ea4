# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark's history across releases (``releases.yml -e releases_history=DIR``): each release's runs, in
time order, with TTFT, TPOT, tok/s and Max C, as Markdown like a run's report and PNG charts over time.

Controller side, no Ansible imports. The input is the releases as the ``release`` module's ``history`` operation
returns them (oldest first, each with its ``evidence`` and ``history``). A release's runs are the results files its
evidence names on this controller: its ``bench`` run (the newest ``bench.yml`` kept), the candidate run of its
``promotion`` (with the verdict against its baseline) and, for the release a promotion was judged against, that
baseline run. A file that is not on this controller, or not a results document, is listed as missing with the
reason; the history is drawn from the others. Charts need matplotlib, as the run's (``report.charts_missing``).
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench import bench as _bench
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench import report as _report

FORMAT = "dgxspark.cluster/bench-history/1"
MARKDOWN = "history.md"
CHARTS_DIR = "charts"
# Chart name -> (title, y label, the figure at the reference level (or the run's), the lines drawn).
CHARTS: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "ttft": ("Time to first token", "TTFT (ms)", "ttft_ms", ("p50", "p90")),
    "tpot": ("Time per output token (ITL)", "TPOT (ms)", "tpot_ms", ("p50", "p90")),
    "tps_user": ("Tokens per second per user", "tok/s per user (1 / TPOT)", "tps_user", ("p10", "p50")),
    "output_tps": ("Output tokens per second, all users", "output tok/s", "output_tps", ("value",)),
    "max_c": ("Max C: concurrent users within the SLOs", "Max C (users)", "max_c", ("value",)),
}
# How each line of a chart is drawn: (line style, marker).
_STYLES = {"p10": (":", "^"), "p50": ("-", "o"), "p90": ("--", "s"), "value": ("-", "o")}


# ---------------------------------------------------------------- the runs
def _time(text: Any) -> datetime.datetime | None:
    try:
        moment = datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


def _promoted_at(record: Mapping[str, Any]) -> str | None:
    times = [str(e.get("at")) for e in record.get("history") or [] if e.get("event") == "promoted" and e.get("at")]
    return max(times) if times else None


def _runs_named(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every run a release's evidence names, once per results file: its release, how it is known, its verdict."""
    runs: dict[str, dict[str, Any]] = {}

    def add(path: Any, release: str, kept_as: str) -> dict[str, Any] | None:
        if not isinstance(path, str) or not path:
            return None
        run = runs.setdefault(
            os.path.normpath(path),
            {"results": path, "release": release, "kept_as": [], "verdict": None, "baseline_of": []},
        )
        if kept_as not in run["kept_as"]:
            run["kept_as"].append(kept_as)
        return run

    for record in records:
        evidence = record.get("evidence") or {}
        bench = evidence.get("bench") if isinstance(evidence.get("bench"), Mapping) else {}
        add(bench.get("results"), record["id"], "bench")
        promotion = evidence.get("promotion") if isinstance(evidence.get("promotion"), Mapping) else {}
        if not promotion:
            continue
        verdict = str(promotion.get("verdict") or "no verdict")
        baseline = promotion.get("baseline") if isinstance(promotion.get("baseline"), Mapping) else {}
        candidate = promotion.get("candidate") if isinstance(promotion.get("candidate"), Mapping) else {}
        against = str(baseline.get("release") or "the promoted release")
        run = add(candidate.get("results"), str(candidate.get("release") or record["id"]), "promotion")
        if run is not None:
            run["verdict"] = {
                "verdict": verdict,
                "against": against,
                "threshold_percent": promotion.get("threshold_percent"),
            }
        base = add(baseline.get("results"), against, "baseline")
        if base is not None:
            base["baseline_of"].append({"release": record["id"], "verdict": verdict})
    return list(runs.values())


def _figures(summary: Mapping[str, Any], level: int | None) -> dict[str, Any]:
    """The run's figures at concurrency ``level`` (None: the run's highest), and its Max C."""
    levels = summary.get("levels") or []
    chosen = next((row for row in levels if row["concurrency"] == level), None) if level is not None else None
    if chosen is None and levels:
        chosen = max(levels, key=lambda row: row["concurrency"])
    figures: dict[str, Any] = {"concurrency": chosen["concurrency"] if chosen else None}
    for _name, (_title, _label, figure, lines) in CHARTS.items():
        for line in lines:
            key = figure if line == "value" else f"{figure}_{line}"
            if figure == "max_c":
                figures[key] = (summary.get("capacity") or {}).get("max_c")
            elif chosen is None:
                figures[key] = None
            elif line == "value":
                figures[key] = chosen.get(figure)
            else:
                figures[key] = chosen["stats"][figure][line]
    return figures


def build(records: Sequence[Mapping[str, Any]], load: Any = None) -> dict[str, Any]:
    """The history: every release (oldest first) with its runs (in time order) and their figures.

    ``records`` are whole releases (or their summaries with ``evidence`` and ``history``); ``load`` reads a results
    file (default ``bench.load_results``: ValueError when it is missing or not a results document). The figures are
    taken at the *reference level*, the highest concurrency every run measured (else each run's highest, said in the
    notes), so that the runs compare like for like.
    """
    load = load or _bench.load_results
    ordered = sorted(records, key=lambda r: (str(r.get("created")), str(r.get("id"))))
    known = {str(r["id"]) for r in ordered}
    runs = _runs_named(ordered)
    summaries: dict[int, dict[str, Any]] = {}
    for index, run in enumerate(runs):
        try:
            results = load(run["results"])
            summaries[index] = _bench.summarize(results, results.get("slos"))
        except (OSError, ValueError) as error:
            run["missing"] = str(error)
    measured = [{row["concurrency"] for row in s.get("levels") or []} for s in summaries.values() if s["figures"]]
    common = set.intersection(*measured) if measured else set()
    level = max(common) if common else None
    notes: list[str] = []
    if measured and level is None:
        notes.append("no concurrency level is in every run: each run's figures are at its own highest level")
    slos: list[dict[str, Any]] = []
    for index, run in enumerate(runs):
        summary = summaries.get(index)
        if summary is None:
            run.update(started_at=None, figures=None, gate_passed=None)
            continue
        identity = summary["identity"]
        run.update(
            run=os.path.basename(os.path.dirname(run["results"])) or run["results"],
            started_at=identity.get("started_at"),
            shape=identity.get("shape"),
            model=identity.get("model"),
            requests_per_level=(identity.get("workload") or {}).get("requests_per_level"),
            gate_passed=summary["gate"]["passed"],
            figures=_figures(summary, level) if summary["figures"] else None,
            slos=list((summary.get("capacity") or {}).get("slos") or []),
        )
        slos = run["slos"] or slos
        if run["release"] not in known:
            notes.append(f"{run['results']}: its release {run['release']} is not on the head any more")
    releases = []
    for record in ordered:
        own = [run for run in runs if run["release"] == record["id"]]
        own.sort(key=lambda run: (run.get("started_at") is None, str(run.get("started_at") or ""), run["results"]))
        releases.append(
            {
                "id": record["id"],
                "state": record.get("state"),
                "created": record.get("created"),
                "by": record.get("by"),
                "promoted_at": _promoted_at(record),
                "profile_path": (record.get("profile") or {}).get("path") or record.get("profile_path"),
                "shape": record.get("shape"),
                "image": record.get("image"),
                "runs": own,
            }
        )
    orphans = [run for run in runs if run["release"] not in known]
    if orphans:
        releases.append(
            {
                "id": "(gone)",
                "state": "gone",
                "created": None,
                "by": None,
                "promoted_at": None,
                "profile_path": None,
                "shape": None,
                "image": None,
                "runs": orphans,
            }
        )
    promoted = next((r["id"] for r in reversed(ordered) if r.get("state") == "promoted"), None)
    return {
        "format": FORMAT,
        "level": level,
        "promoted": promoted,
        "releases": releases,
        "runs": sum(len(r["runs"]) for r in releases),
        "measured": sum(1 for r in releases for run in r["runs"] if run.get("figures")),
        "missing": [
            {"results": run["results"], "release": run["release"], "why": run["missing"]}
            for run in runs
            if run.get("missing")
        ],
        "slos": slos,
        "notes": notes,
    }


# ---------------------------------------------------------------- Markdown
def _verdict(run: Mapping[str, Any]) -> str:
    parts = []
    verdict = run.get("verdict")
    if verdict:
        parts.append(f"**{verdict['verdict']}** against {verdict['against']}")
    for judged in run.get("baseline_of") or []:
        parts.append(f"baseline of {judged['release']} ({judged['verdict']})")
    return "; ".join(parts) or "-"


def _state(release: Mapping[str, Any], promoted: str | None) -> str:
    if release["id"] == promoted:
        return f"**promoted** (since {release.get('promoted_at') or release.get('created')})"
    return str(release.get("state") or "-")


def headline(history: Mapping[str, Any]) -> list[str]:
    """What the history holds, a line each: for the play's output and the report's top."""
    level = history.get("level")
    lines = [
        f"{len([r for r in history['releases'] if r['state'] != 'gone'])} release(s), {history['runs']} run(s) "
        f"named in their evidence, {history['measured']} with figures"
        + (f", at C={level} (the highest concurrency every run measured)" if level is not None else ""),
        f"promoted: {history.get('promoted') or 'none'}",
    ]
    lines += [f"missing, a run of {m['release']}: {m['why']}" for m in history.get("missing") or []]
    return lines


def render_markdown(
    history: Mapping[str, Any], charts: Sequence[str] | None = None, relative_to: str | None = None
) -> str:
    """The history in Markdown: what it holds, the charts, then a table per release (oldest first)."""
    level = history.get("level")
    at = f"C={level}" if level is not None else "each run's highest C"
    lines = ["# Benchmark history across releases", ""]
    lines += [f"- {line}" for line in headline(history)] + [""]
    lines += [
        f"Each run's figures at {at}; Max C is the run's own (its SLOs: "
        + ("; ".join(slo["label"] for slo in history.get("slos") or []) or "none measured")
        + "). A release's runs are the ones its evidence names: the `bench.yml` run it keeps (the newest) and the "
        "runs of a promotion (the candidate's, and the baseline it was judged against).",
        "",
    ]
    lines += _report._charts_section(charts, relative_to)
    header = ["run started (UTC)", "run", "C", "TTFT p50 ms", "TTFT p90 ms", "TPOT p50 ms", "tok/s/user p50"]
    header += ["output tok/s", "Max C", "verdict"]
    lines += ["## Releases", ""]
    for release in history["releases"]:
        lines += [f"### {release['id']}: {_state(release, history.get('promoted'))}", ""]
        if release["state"] != "gone":
            lines += [
                f"Created {release.get('created')} by {release.get('by') or '-'}; "
                f"profile {release.get('profile_path')}, shape {release.get('shape')}, image {release.get('image')}.",
                "",
            ]
        else:
            lines += ["Runs a promotion names whose release is no longer on the head.", ""]
        if not release["runs"]:
            lines += ["No benchmark run kept (bench.yml keeps its run in the release that serves).", ""]
            continue
        rows = []
        for run in release["runs"]:
            figures = run.get("figures")
            if run.get("missing"):
                rows.append(["-", run["results"], "-", "-", "-", "-", "-", "-", "-", f"{_verdict(run)}; missing"])
                continue
            if figures is None:
                rows.append([run["started_at"], run["run"], "-", "gate failed", "-", "-", "-", "-", "-", _verdict(run)])
                continue
            rows.append(
                [
                    run["started_at"],
                    run["run"],
                    figures["concurrency"],
                    _report._fmt(figures["ttft_ms_p50"], 1),
                    _report._fmt(figures["ttft_ms_p90"], 1),
                    _report._fmt(figures["tpot_ms_p50"], 2),
                    _report._fmt(figures["tps_user_p50"], 2),
                    _report._fmt(figures["output_tps"], 1),
                    "none" if figures["max_c"] is None else figures["max_c"],
                    _verdict(run),
                ]
            )
        lines += _report._table(header, rows, right=[False, False, *([True] * 7), False]) + [""]
        for run in release["runs"]:
            if run.get("missing"):
                lines.append(f"- missing: {run['missing']}")
        if any(run.get("missing") for run in release["runs"]):
            lines.append("")
    if history.get("notes"):
        lines += ["## Notes", ""] + [f"- {note}" for note in history["notes"]] + [""]
    return "\n".join(lines)


# ---------------------------------------------------------------- charts
def write_charts(history: Mapping[str, Any], out_dir: str) -> list[str]:
    """One PNG per figure over time in ``out_dir`` (``history-<name>.png``, :data:`CHARTS`); the paths written.

    Each run is a point at its start time, coloured by its release (the legend names each release and its state);
    the promoted release's points are larger, edged in black. A dashed grey line is an SLO on that figure. Nothing
    is written without matplotlib or without a run that has figures.
    """
    points = [
        (release, run, _time(run["started_at"]))
        for release in history["releases"]
        for run in release["runs"]
        if run.get("figures") and _time(run.get("started_at"))
    ]
    if not points or _report.charts_missing():
        return []
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    os.makedirs(out_dir, exist_ok=True)
    points.sort(key=lambda point: point[2])
    palette = colormaps["tab10"]
    releases = [r for r in history["releases"] if any(p[0] is r for p in points)]
    colour = {r["id"]: palette(index % 10) for index, r in enumerate(releases)}
    promoted = history.get("promoted")
    level = history.get("level")
    at = f"at C={level}" if level is not None else "at each run's highest C"
    times = [point[2] for point in points]
    written = []
    for name, (title, ylabel, figure, lines) in CHARTS.items():
        fig = Figure(figsize=(8.0, 4.8), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        drawn = []
        for line in lines:
            key = figure if line == "value" else f"{figure}_{line}"
            style, marker = _STYLES[line]
            series = [(when, run["figures"][key], release) for release, run, when in points]
            if figure == "max_c":  # no level within the SLOs: drawn at 0, marked x
                series = [(when, 0 if value is None else value, release) for when, value, release in series]
            series = [entry for entry in series if entry[1] is not None]
            if not series:
                continue
            ax.plot([s[0] for s in series], [s[1] for s in series], linestyle=style, color="grey", alpha=0.6, zorder=1)
            for when, value, release in series:
                big = release["id"] == promoted
                if figure == "max_c" and value == 0:  # an unfilled marker: its colour is its edge
                    edge: dict[str, Any] = {"marker": "x", "linewidths": 2.5 if big else 1.5}
                else:
                    edge = {"marker": marker, "edgecolors": "black" if big else "none", "linewidths": 1.5 if big else 0}
                ax.scatter([when], [value], s=110 if big else 45, color=colour[release["id"]], zorder=3, **edge)
            drawn.append(line)
        for slo in history.get("slos") or []:
            if slo["metric"] == figure:
                ax.axhline(slo["threshold"], linestyle="--", color="dimgrey", linewidth=1)
        handles = [
            Line2D(
                [],
                [],
                linestyle="none",
                marker="o",
                markersize=9 if r["id"] == promoted else 6,
                markerfacecolor=colour[r["id"]],
                markeredgecolor="black" if r["id"] == promoted else colour[r["id"]],
                label=f"{r['id']} ({'promoted' if r['id'] == promoted else r['state']})",
            )
            for r in releases
        ]
        if len(drawn) > 1 or drawn == ["p50"]:
            handles += [
                Line2D([], [], color="grey", linestyle=_STYLES[line][0], marker=_STYLES[line][1], label=line)
                for line in drawn
            ]
        handles += [
            Line2D([], [], color="dimgrey", linestyle="--", label=f"SLO {slo['label']}")
            for slo in history.get("slos") or []
            if slo["metric"] == figure
        ]
        if figure == "max_c" and any(run["figures"]["max_c"] is None for _release, run, _when in points):
            handles.append(Line2D([], [], linestyle="none", marker="x", color="grey", label="no level within the SLOs"))
        ax.legend(handles=handles, fontsize=7, loc="best")
        locator = AutoDateLocator()
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
        if max(times) - min(times) < datetime.timedelta(hours=1):
            middle = min(times) + (max(times) - min(times)) / 2
            ax.set_xlim(middle - datetime.timedelta(hours=1), middle + datetime.timedelta(hours=1))
        ax.set_xlabel("run started (UTC)")
        ax.set_ylabel(ylabel)
        where = "" if figure == "max_c" else f" {at}"
        ax.set_title(f"{title}{where}, across releases", fontsize=10)
        bottom = -0.4 if figure == "max_c" else 0  # a Max C of none is drawn at 0, seen whole
        top = ax.get_ylim()[1]
        ax.set_ylim(bottom=bottom, top=top + 0.1 * (top - bottom))  # room above the highest point
        if figure == "max_c":
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        path = os.path.join(out_dir, f"history-{name}.png")
        fig.savefig(path, format="png")
        written.append(path)
    return written


# ---------------------------------------------------------------- the folder
def write(folder: str, records: Sequence[Mapping[str, Any]], load: Any = None) -> dict[str, Any]:
    """Write ``folder/history.md`` and ``folder/charts/history-*.png`` (each replaced whole) from the releases.

    Returns the history, the files written (``report``, ``charts``) and ``warnings`` (no charts drawn)."""
    history = build(records, load)
    os.makedirs(folder, exist_ok=True)
    charts = write_charts(history, os.path.join(folder, CHARTS_DIR))
    path = os.path.join(folder, MARKDOWN)
    _report._atomic_write(path, render_markdown(history, charts, relative_to=folder))
    missing = _report.charts_missing()
    warnings = [missing] if missing and history["measured"] else []
    return {"history": history, "report": path, "charts": charts, "warnings": warnings}
