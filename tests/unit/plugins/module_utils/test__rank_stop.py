# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import json
import os
import stat
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils._docker_engine import DockerEngineError
from ansible_collections.dgxspark.cluster.plugins.module_utils._rank_stop import (
    RANK_LABEL,
    RankStopError,
    rank_facts,
    save_record,
    stop_ranks,
)


def frame(text: str) -> bytes:
    payload = text.encode()
    return b"\x01\x00\x00\x00" + len(payload).to_bytes(4, "big") + payload


class FakeEngine:
    """An engine that keeps containers and answers the requests stop_ranks makes (and records them)."""

    def __init__(self, containers: list[dict[str, Any]], refuse_stop: bool = False, keep_running: bool = False):
        self.containers = {c["Id"]: c for c in containers}
        self.requests: list[str] = []
        self.refuse_stop = refuse_stop
        self.keep_running = keep_running

    def _find(self, ident: str) -> dict[str, Any] | None:
        ident = unquote(ident)
        return self.containers.get(ident) or next(
            (c for c in self.containers.values() if c["Name"].lstrip("/") == ident), None
        )

    def get(self, url: str) -> tuple[int, Any]:
        self.requests.append(f"GET {url}")
        parts = urlsplit(url)
        if parts.path == "/containers/json":
            wanted = json.loads(parse_qs(parts.query)["filters"][0])["label"]
            return 200, [
                {"Id": c["Id"], "Names": [c["Name"]], "State": c["State"]["Status"], "Labels": c["Config"]["Labels"]}
                for c in self.containers.values()
                if all(label in c["Config"]["Labels"] for label in wanted)
            ]
        found = self._find(parts.path.split("/")[2])
        return (200, found) if found else (404, {"message": "no such container"})

    def get_raw(self, url: str) -> tuple[int, bytes]:
        self.requests.append(f"GET {url}")
        found = self._find(urlsplit(url).path.split("/")[2])
        if not found:
            return 404, b""
        tail = int(parse_qs(urlsplit(url).query)["tail"][0])
        return 200, b"".join(frame(line + "\n") for line in found["logs"][-tail:])

    def close(self) -> None:
        self.requests.append("CLOSE")

    def send(self, method: str, url: str) -> tuple[int, Any]:
        self.requests.append(f"{method} {url}")
        found = self._find(urlsplit(url).path.split("/")[2])
        if found is None:
            return 404, {"message": "no such container"}
        if method == "POST":
            if self.refuse_stop:
                return 500, {"message": "cannot stop"}
            if not found["State"]["Running"]:
                return 304, None
            if not self.keep_running:
                found["State"].update(Running=False, Status="exited", ExitCode=143, FinishedAt="2026-12-01T12:00:00Z")
            return 204, None
        del self.containers[found["Id"]]
        return 204, None


def container(ident: str, name: str, rank: str | None, running: bool = True) -> dict[str, Any]:
    labels = {"other": "x"} if rank is None else {RANK_LABEL: rank, "dgxspark.cluster.spec_sha256": "abc"}
    return {
        "Id": ident,
        "Name": f"/{name}",
        "Image": "sha256:img",
        "Config": {"Labels": labels, "Image": "dgxspark-sim/engine:latest"},
        "State": {"Running": running, "Status": "running" if running else "exited", "ExitCode": 0 if running else 1},
        "logs": [f"{name} line {i}" for i in range(300)],
    }


def test_stops_saves_and_removes_only_labelled_ranks(tmp_path) -> None:
    engine = FakeEngine(
        [container("a1", "vllm_dsv41", "1"), container("b2", "mine", None), container("c3", "old", "0", False)]
    )
    result = stop_ranks(engine, remove=True, stop_timeout=5, save_dir=str(tmp_path / "ranks"), clock=lambda: 0)
    assert result["stopped"] == ["vllm_dsv41"]
    assert sorted(result["removed"]) == ["old", "vllm_dsv41"]
    assert list(engine.containers) == ["b2"]  # the container the collection did not create is untouched
    assert not [r for r in engine.requests if "b2" in r or "mine" in r]
    by_name = {r["name"]: r for r in result["ranks"]}
    assert by_name["vllm_dsv41"]["was_running"] is True and by_name["vllm_dsv41"]["exit_code"] == 143
    assert by_name["old"]["was_running"] is False and by_name["old"]["exit_code"] == 1
    assert len(by_name["old"]["log_tail"]) == 20 and by_name["old"]["log_tail"][-1] == "old line 299"
    saved = by_name["vllm_dsv41"]["saved"]
    assert saved.endswith("vllm_dsv41-19700101T000000Z.json")
    record = json.loads(open(saved, encoding="utf-8").read())
    assert record["exit_code"] == 143 and len(record["log_tail"]) == 200 and record["rank"] == "1"
    assert stat.S_IMODE(os.stat(saved).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "ranks").st_mode) == 0o700
    assert "POST /containers/a1/stop?t=5" in engine.requests


def test_nothing_to_stop_is_fine() -> None:
    result = stop_ranks(FakeEngine([container("b2", "mine", None)]), remove=True, stop_timeout=5, save_dir=None)
    assert result == {"ranks": [], "stopped": [], "removed": [], "changed": False}


def test_keep_containers_when_not_removing() -> None:
    engine = FakeEngine([container("a1", "vllm_dsv41", "0")])
    result = stop_ranks(engine, remove=False, stop_timeout=5, save_dir=None)
    assert result["stopped"] == ["vllm_dsv41"] and result["removed"] == []
    assert engine.containers["a1"]["State"]["Running"] is False
    assert result["ranks"][0]["saved"] is None and result["ranks"][0]["removed"] is False


def test_check_mode_changes_nothing(tmp_path) -> None:
    engine = FakeEngine([container("a1", "vllm_dsv41", "0"), container("c3", "old", "1", False)])
    result = stop_ranks(engine, remove=True, stop_timeout=5, save_dir=str(tmp_path / "r"), check_mode=True)
    assert result["stopped"] == ["vllm_dsv41"] and sorted(result["removed"]) == ["old", "vllm_dsv41"]
    assert result["changed"] is True
    assert not [r for r in engine.requests if not r.startswith("GET")]
    assert engine.containers["a1"]["State"]["Running"] is True and not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "engine,message",
    [
        (FakeEngine([container("a1", "vllm_dsv41", "0")], refuse_stop=True), r"refused to stop it \(HTTP 500"),
        (FakeEngine([container("a1", "vllm_dsv41", "0")], keep_running=True), "still running after the stop"),
    ],
)
def test_a_rank_that_does_not_stop_fails(engine: FakeEngine, message: str) -> None:
    with pytest.raises(RankStopError, match=message):
        stop_ranks(engine, remove=False, stop_timeout=5, save_dir=None)


def test_an_engine_that_cannot_be_asked_fails() -> None:
    class Down(FakeEngine):
        def get(self, url: str) -> tuple[int, Any]:
            raise DockerEngineError("nothing answers on /var/run/docker.sock (dockerd is not running)")

    with pytest.raises(RankStopError, match="could not be asked: nothing answers"):
        stop_ranks(Down([]), remove=True, stop_timeout=5, save_dir=None)


# ----------------------------------------------------------------------------- rank_facts: read-only


def test_rank_facts_reads_the_labelled_ranks_and_changes_nothing(tmp_path) -> None:
    exited = container("c3", "vllm_dsv41", "1", False)
    exited["State"].update(ExitCode=137, OOMKilled=True, FinishedAt="2026-12-02T03:00:00Z")
    engine = FakeEngine([exited, container("b2", "mine", None), container("a1", "vllm_dsv41_b", "0")])
    facts = rank_facts(engine, str(tmp_path / "absent"), log_lines=3)
    assert facts["error"] is None and facts["records"] == [] and facts["problems"] == []
    by_rank = {c["rank"]: c for c in facts["containers"]}
    assert sorted(by_rank) == ["0", "1"]  # the unlabelled container is not one
    assert by_rank["1"]["running"] is False and by_rank["1"]["exit_code"] == 137 and by_rank["1"]["oom_killed"] is True
    assert by_rank["1"]["log_tail"] == ["vllm_dsv41 line 297", "vllm_dsv41 line 298", "vllm_dsv41 line 299"]
    assert by_rank["0"]["running"] is True
    assert [r for r in engine.requests if not r.startswith("GET")] == ["CLOSE"]
    assert not [r for r in engine.requests if "b2" in r or "mine" in r]


def test_rank_facts_gives_the_newest_saved_record_of_each_rank(tmp_path) -> None:
    ranks = tmp_path / "ranks"
    base = {"id": "x", "rank": "0", "exit_code": 143, "log_tail": ["bye"]}
    save_record(str(ranks), {**base, "name": "vllm_dsv41", "finished_at": "2026-12-01T10:00:00Z"}, 1_000)
    newest = save_record(str(ranks), {**base, "name": "vllm_dsv41", "finished_at": "2026-12-02T10:00:00Z"}, 90_000)
    other = save_record(str(ranks), {**base, "name": "other", "finished_at": "2026-12-01T11:00:00Z"}, 5_000)
    (ranks / "junk-20261202T000000Z.json").write_text("{not json", encoding="utf-8")
    (ranks / "notes.txt").write_text("not a record", encoding="utf-8")
    facts = rank_facts(FakeEngine([]), str(ranks))
    assert [r["path"] for r in facts["records"]] == [newest, other]  # newest first, one a name
    assert facts["records"][0]["finished_at"] == "2026-12-02T10:00:00Z"
    assert len(facts["problems"]) == 1 and "junk-20261202T000000Z.json" in facts["problems"][0]


def test_rank_facts_says_when_the_engine_cannot_be_asked(tmp_path) -> None:
    class Down(FakeEngine):
        def get(self, url: str) -> tuple[int, Any]:
            raise DockerEngineError("nothing answers on /var/run/docker.sock (dockerd is not running)")

    facts = rank_facts(Down([]), None)
    assert facts["containers"] == [] and facts["records"] == []
    assert facts["error"] == (
        "the Docker engine could not be asked: nothing answers on /var/run/docker.sock (dockerd is not running)"
    )
