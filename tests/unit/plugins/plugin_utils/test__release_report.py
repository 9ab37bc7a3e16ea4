# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The releases as an operator reads them, and where a rollback goes."""

from __future__ import annotations

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.release import report as _release_report

P1, P2, C3 = (f"r2026120{n}T100000Z-{n:x}{n:x}{n:x}aaaabbbb" for n in (1, 2, 3))


def summary(ident: str, state: str, spec: str) -> dict:
    return {
        "id": ident,
        "state": state,
        "created": "2026-12-01T10:00:00Z",
        "by": "op@ctl",
        "profile_sha256": "ab" * 32,
        "profile_path": "p.json",
        "shape": "tp3-triangle",
        "image": "img:1",
        "images": {"head": "sha256:" + "c" * 64},
        "spec_sha256": {"head": spec, "w1": spec + "w"},
        "evidence": [],
        "last_event": {"event": "booted", "at": "2026-12-01T10:00:00Z"},
    }


LISTED = {
    "releases": [summary(P1, "retired", "s1"), summary(P2, "promoted", "s2"), summary(C3, "candidate", "s3")],
    "promoted": P2,
    "previous": P1,
    "problems": [],
}


def running(spec: str) -> list[dict]:
    labels = {"dgxspark.cluster.rank": "0", "dgxspark.cluster.spec_sha256": spec}
    return [{"name": "other", "state": "running", "labels": {}}, {"name": "vllm", "state": "running", "labels": labels}]


def test_the_listing_marks_the_promoted_and_previous_newest_first() -> None:
    lines = _release_report.listing(LISTED)
    assert lines[0].startswith(C3) and "candidate" in lines[0]
    assert lines[1].startswith(P2) and lines[1].endswith("<- promoted")
    assert lines[2].endswith("<- previous")
    assert lines[-1].startswith(f"promoted: {P2}; a rollback goes to {P1}")
    assert _release_report.listing({"releases": []})[0].startswith("no release yet")


def test_the_target_follows_what_runs_on_the_head() -> None:
    assert _release_report.head_spec(running("s3")) == "s3"
    assert _release_report.head_spec([]) is None
    # a candidate runs: back to the promoted release; the promoted one runs (or nothing): to the previous one
    assert _release_report.rollback_target(LISTED, "head", "s3") == P2
    assert _release_report.rollback_target(LISTED, "head", "s2") == P1
    assert _release_report.rollback_target(LISTED, "head", None) == P1
    assert _release_report.rollback_target(LISTED, "head", "s3", wanted=C3) == C3
    with pytest.raises(ValueError, match="no release r2099"):
        _release_report.rollback_target(LISTED, "head", None, wanted="r20990101T000000Z-000000000000")
    alone = {"releases": [summary(P2, "promoted", "s2")], "promoted": P2, "previous": None}
    with pytest.raises(ValueError, match=f"the promoted release {P2} has no predecessor"):
        _release_report.rollback_target(alone, "head", "s2")


def test_one_release_is_shown_whole_its_profile_last() -> None:
    record = {
        **summary(P2, "promoted", "s2"),
        "profile": {"path": "p.json", "sha256": "ab" * 32, "text": '{\n  "schema_version": 2\n}'},
        "evidence": {"bench": {"tok_s": 137.6}},
        "history": [{"event": "promoted", "at": "t", "by": "op", "detail": "the first release"}],
    }
    lines = _release_report.showing(record)
    assert lines[0] == f"release {P2}: promoted, created 2026-12-01T10:00:00Z by op@ctl"
    assert "evidence bench: {'tok_s': 137.6}" in lines
    assert "history: t promoted by op (the first release)" in lines
    assert lines[-3:] == ["{", '  "schema_version": 2', "}"]


def test_a_candidate_with_the_promoted_spec_and_another_host_section_rolls_back_to_the_promoted_release() -> None:
    """A change of the host section alone: the candidate runs the promoted release's spec. While it is live, a
    rollback goes to the promoted release; once it is retired, the promoted one serves and a rollback goes back."""
    host_only = {**summary(C3, "candidate", "s2"), "created": "2026-12-03T10:00:00Z"}
    listed = {**LISTED, "releases": [summary(P1, "retired", "s1"), summary(P2, "promoted", "s2"), host_only]}
    assert _release_report.rollback_target(listed, "head", "s2") == P2
    retired = {**listed, "releases": [*listed["releases"][:2], {**host_only, "state": "retired"}]}
    assert _release_report.rollback_target(retired, "head", "s2") == P1
