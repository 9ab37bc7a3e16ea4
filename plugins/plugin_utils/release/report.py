# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The releases as an operator reads them (playbooks/releases.yml), and where a rollback goes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.module_utils._labels import RANK_LABEL, SPEC_LABEL


def _short(value: Any, width: int = 12) -> str:
    text = str(value or "")
    return text.split(":", 1)[-1][:width] if text else "-"


def listing(result: Mapping[str, Any]) -> list[str]:
    """A line per release (newest first) from the ``release`` module's answer, then the promoted and previous."""
    releases = list(result.get("releases") or [])
    if not releases:
        return ["no release yet: the first boot that serves records one, promoted"]
    marks = {result.get("promoted"): "promoted", result.get("previous"): "previous"}
    lines = []
    for release in reversed(releases):
        images = sorted({_short(i) for i in (release.get("images") or {}).values()})
        last = release.get("last_event") or {}
        lines.append(
            f"{release['id']}  {release['state']:<9}  {release['created']}  by {release['by']}  "
            f"profile {_short(release.get('profile_sha256'))} ({release.get('profile_path')}), {release['shape']}  "
            f"image {release['image']} ({', '.join(images)})"
            + (f"  evidence: {', '.join(release['evidence'])}" if release.get("evidence") else "")
            + (f"  last: {last.get('event')} {last.get('at')}" if last else "")
            + (f"  <- {marks[release['id']]}" if release["id"] in marks else "")
        )
    lines.append(
        f"promoted: {result.get('promoted') or 'none'}; a rollback goes to {result.get('previous') or 'nothing yet'} "
        "(or, while a candidate serves, to the promoted release)"
    )
    for problem in result.get("problems") or []:
        lines.append(f"not a release: {problem}")
    return lines


def showing(record: Mapping[str, Any]) -> list[str]:
    """One release whole, its profile's text last."""
    lines = [
        f"release {record['id']}: {record['state']}, created {record['created']} by {record['by']}",
        f"profile: {record['profile'].get('path')} (sha256 {record['profile'].get('sha256')}), shape {record['shape']}",
        f"image: {record['image']}",
    ]
    lines += [
        f"  {host}: image {image}, spec {record['spec_sha256'].get(host)}" for host, image in record["images"].items()
    ]
    for name, data in (record.get("evidence") or {}).items():
        lines.append(f"evidence {name}: {data}")
    for event in record.get("history") or []:
        lines.append(
            f"history: {event.get('at')} {event.get('event')} by {event.get('by')}"
            + (f" ({event['detail']})" if event.get("detail") else "")
        )
    lines.append("profile as booted:")
    lines += str(record["profile"].get("text", "")).splitlines()
    return lines


def head_spec(containers: Any) -> str | None:
    """The spec label of the collection's rank container that runs, from the head's node_facts docker containers."""
    for container in containers or []:
        labels = container.get("labels") or {}
        if container.get("state") == "running" and RANK_LABEL in labels:
            return str(labels.get(SPEC_LABEL) or "") or None
    return None


def rollback_target(result: Mapping[str, Any], head: str, head_spec: str | None, wanted: str = "") -> str:
    """The release a rollback goes to: ``wanted`` when given; else the promoted one while a candidate runs on the
    head ``head`` (another spec, or the promoted one's spec with another host section: of the releases with the
    spec that runs, the newest that is not retired serves), else the previous promoted one. Raises ValueError when
    there is none."""
    known = {r["id"]: r for r in result.get("releases") or []}
    if wanted:
        if wanted not in known:
            raise ValueError(f"no release {wanted} on the head (known: {', '.join(known) or 'none'})")
        return wanted
    promoted = known.get(result.get("promoted") or "")
    if promoted is not None and head_spec:
        ordered = sorted(known.values(), key=lambda r: (str(r.get("created")), r["id"]))
        matching = [r for r in ordered if (r.get("spec_sha256") or {}).get(head) == head_spec]
        live = [r for r in matching if r.get("state") != "retired"]
        serving = (live or matching)[-1] if matching else None
        if serving is None or serving["id"] != promoted["id"]:
            return promoted["id"]
    if result.get("previous"):
        return str(result["previous"])
    raise ValueError(
        "nothing to roll back to: "
        + ("no release yet" if not known else f"the promoted release {result.get('promoted')} has no predecessor")
    )


def evidence_line(answer: Mapping[str, Any]) -> str:
    """Which release a benchmark run is kept as the evidence of: the release module's answer to ``evidence``, its
    ``release``, or why none (its ``msg``: no release has exactly the specs that ran)."""
    if "release" in answer:
        return f"the run is kept as the evidence of release {answer['release']['id']}"
    return f"no release serves ({answer.get('msg', '')}): the run is not kept in one"


def promotion_outcome(candidate: str, promoted: str, rolled_back: bool, verdict: str) -> str:
    """What promote.yml did: the ``candidate`` promoted and the ``promoted`` release retired, or (``rolled_back``,
    its comparison's ``verdict`` not a pass) the promoted release serving again, the candidate keeping its runs."""
    if not rolled_back:
        return (
            f"promoted: {candidate} serves and is the promoted release; {promoted} is retired "
            "(rollback.yml goes back to it)"
        )
    return (
        f"NOT promoted ({verdict}): rolled back to {promoted}, which serves again; the candidate {candidate} keeps "
        "its runs and verdict"
    )
