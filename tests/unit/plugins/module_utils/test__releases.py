# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Releases on the head: their files, promotion, the previous promoted one, the rollback target."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils import _releases

HOSTS = ("head", "w1", "w2")


def record(n: int, state: str = "candidate", promoted_at: str | None = None) -> dict[str, Any]:
    created = f"2026-12-0{n}T10:00:00Z"
    history = [{"event": "booted", "at": created, "by": "op"}]
    if promoted_at:
        history.append({"event": "promoted", "at": promoted_at, "by": "op"})
    return {
        "schema_version": 1,
        "id": _releases.release_id(created, f"{n:x}" * 64),
        "state": state,
        "created": created,
        "by": "op@controller",
        "profile": {"path": "p.json", "sha256": f"{n:x}" * 64, "text": "{}"},
        "shape": "tp3-triangle",
        "spec_sha256": {h: f"spec{n}-{h}" for h in HOSTS},
        "image": "img:1",
        "images": dict.fromkeys(HOSTS, f"sha256:{n}"),
        "history": history,
    }


def test_ids_are_time_and_profile() -> None:
    assert _releases.release_id("2026-12-01T15:53:00Z", "3c9f0a1b2d4e" + "0" * 52) == "r20261201T155300Z-3c9f0a1b2d4e"
    with pytest.raises(_releases.ReleaseError):
        _releases.release_id("yesterday", "abc")


def test_written_as_0600_in_0700_and_read_back(tmp_path: Path) -> None:
    directory = tmp_path / "releases"
    first = record(1, "promoted", "2026-12-01T10:00:00Z")
    path = _releases.write(str(directory), first, exclusive=True)
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert json.loads(Path(path).read_text())["id"] == first["id"]
    with pytest.raises(_releases.ReleaseError, match="exists already"):
        _releases.write(str(directory), first, exclusive=True)
    (directory / "notes.json").write_text("{}")
    records, problems = _releases.read_all(str(directory))
    assert [r["id"] for r in records] == [first["id"]]
    assert problems and "notes.json" in problems[0] and "lacks" in problems[0]


def test_promoting_one_of_two_candidates_retires_the_promoted_release_and_the_other_candidate() -> None:
    """One promoted release and two candidates (issue 27: a mutant that kept the other candidates survived every
    release test): the promoted one and the other candidate are retired, a retired one is left alone."""
    old, one, two, three = record(1, "retired"), record(2, "promoted", "2026-12-02T11:00:00Z"), record(3), record(4)
    changed = _releases.promote([old, one, two, three], three["id"], "2026-12-05T11:00:00Z", "op", "passed")
    states = {r["id"]: r["state"] for r in changed}
    assert states == {one["id"]: "retired", two["id"]: "retired", three["id"]: "promoted"}
    assert old["id"] not in states
    assert [r["history"][-1]["detail"] for r in changed if r["state"] == "retired"] == [f"{three['id']} promoted"] * 2
    assert _releases.promote(changed, three["id"], "2026-12-05T12:00:00Z", "op") == []  # nothing left to change


def test_promotion_retires_the_others_and_the_previous_is_the_one_before() -> None:
    one = record(1, "promoted", "2026-12-01T11:00:00Z")
    two = record(2)
    changed = _releases.promote([one, two], two["id"], "2026-12-02T11:00:00Z", "op", "comparison passed")
    states = {r["id"]: r["state"] for r in changed}
    assert states == {one["id"]: "retired", two["id"]: "promoted"}
    after = [next(c for c in changed if c["id"] == r["id"]) for r in (one, two)]
    assert _releases.promoted(after)["id"] == two["id"]
    assert _releases.previous(after)["id"] == one["id"]
    assert after[1]["history"][-1] == {
        "event": "promoted",
        "at": "2026-12-02T11:00:00Z",
        "by": "op",
        "detail": "comparison passed",
    }
    assert _releases.promote(after, two["id"], "x", "op") == []  # promoted already, nothing else to retire
    with pytest.raises(_releases.ReleaseError, match="no release"):
        _releases.promote(after, "r20990101T000000Z-000000000000", "x", "op")


def test_the_rollback_target_depends_on_what_serves() -> None:
    one = record(1, "retired", "2026-12-01T11:00:00Z")
    two = record(2, "promoted", "2026-12-02T11:00:00Z")
    three = record(3, "candidate")
    records = [one, two, three]
    # the promoted release serves (or nothing does): back to the previous promoted one
    assert _releases.rollback_target(records, two["spec_sha256"])["id"] == one["id"]
    assert _releases.rollback_target(records, {})["id"] == one["id"]
    # a candidate serves: back to the promoted one
    assert _releases.rollback_target(records, three["spec_sha256"])["id"] == two["id"]
    assert _releases.protected_images(records) == {two["id"]: ["sha256:2"], one["id"]: ["sha256:1"]}


def test_facts_and_summaries(tmp_path: Path) -> None:
    assert _releases.facts(str(tmp_path / "none"))["present"] is False
    one = record(1, "promoted", "2026-12-01T11:00:00Z")
    _releases.write(str(tmp_path), _releases.add_evidence(one, "bench", {"tok_s": 137.6}, "t", "op"), exclusive=True)
    facts = _releases.facts(str(tmp_path))
    assert facts["promoted"] == one["id"] and facts["previous"] is None
    summary = facts["releases"][0]
    assert summary["evidence"] == ["bench"] and summary["last_event"]["event"] == "evidence"
    assert "text" not in json.dumps(summary)


def test_a_release_without_its_text_keeps_its_evidence_and_history() -> None:
    one = _releases.add_evidence({**record(1), "plan": {"ranks": []}}, "bench", {"results": "/r.json"}, "t", "op")
    kept = _releases.without_text(one)
    assert "plan" not in kept and kept["profile"] == {"path": "p.json", "sha256": "1" * 64}
    assert kept["evidence"] == {"bench": {"results": "/r.json"}} and kept["history"][-1]["event"] == "evidence"
    assert one["profile"]["text"] == "{}" and "plan" in one  # the record itself is left as it was


def test_a_malformed_record_is_named() -> None:
    bad = {**record(1), "state": "live"}
    with pytest.raises(_releases.ReleaseError, match="state 'live' is not one of candidate, promoted, retired"):
        _releases.check_record(bad)


def test_the_host_sections_hash_is_canonical_and_covers_every_host_setting() -> None:
    host = {"memguard_gib": 1, "helper_services": ["a.service"]}
    same = _releases.host_sha256({"host": dict(reversed(list(host.items()))), "other": 1})
    assert _releases.host_sha256({"host": host}) == same
    assert _releases.host_sha256({"host": {**host, "memguard_gib": 2}}) != same
    assert _releases.host_sha256({"host": {**host, "helper_services": []}}) != same
    assert _releases.host_sha256({}) == _releases.host_sha256({"host": {}})
    for key, value in {"kernel": {"sysctl": {"vm.swappiness": 1}}, "startup_memguard_grace_seconds": 60}.items():
        assert _releases.host_sha256({"host": {**host, key: value}}) != same, key


def test_a_floor_only_the_preflight_reads_is_not_a_release() -> None:
    """min_mem_available_gib is judged before a boot and changes nothing that serves: raising it is no release."""
    host = {"memguard_gib": 1, "min_mem_available_gib": 100}
    assert _releases.host_sha256({"host": {**host, "min_mem_available_gib": 4096}}) == _releases.host_sha256(
        {"host": host}
    )
    assert _releases.host_sha256({"host": host}) == _releases.host_sha256({"host": {"memguard_gib": 1}})


def test_of_two_releases_with_the_same_specs_the_live_one_serves() -> None:
    """A change of the host section alone: the candidate runs the promoted release's specs. While it is judged it
    serves; after a rollback (candidate retired, promoted again) the promoted release does."""
    promoted = {**record(1, "promoted", "2026-12-01T11:00:00Z")}
    candidate = {**record(2, "candidate"), "spec_sha256": dict(promoted["spec_sha256"])}
    assert _releases.serving([promoted, candidate], promoted["spec_sha256"])["id"] == candidate["id"]
    assert _releases.rollback_target([promoted, candidate], promoted["spec_sha256"])["id"] == promoted["id"]
    retired = {**candidate, "state": "retired"}
    assert _releases.serving([promoted, retired], promoted["spec_sha256"])["id"] == promoted["id"]
    # every one retired: the newest that runs these specs
    every_retired = [{**promoted, "state": "retired"}, retired]
    assert _releases.serving(every_retired, promoted["spec_sha256"])["id"] == retired["id"]
    assert _releases.serving([promoted, candidate], dict.fromkeys(HOSTS, "other")) is None
