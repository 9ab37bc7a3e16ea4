# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""rank_start: only the container the plan created is started, by its own name; a rank that exits at once
fails with its exit code and log tail; one that runs is left alone; check mode starts nothing."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils._docker_engine import DockerEngineError
from ansible_collections.dgxspark.cluster.plugins.module_utils._rank_start import RankStartError, start_rank

SPEC = "a" * 64


def frame(text: str) -> bytes:
    payload = text.encode()
    return b"\x01\x00\x00\x00" + len(payload).to_bytes(4, "big") + payload


class FakeEngine:
    """One engine's containers; ``POST .../start`` runs a container unless it is set to exit at once."""

    def __init__(self, containers: list[dict[str, Any]], exits: int | None = None, refuse: bool = False) -> None:
        self.containers = {c["Id"]: c for c in containers}
        self.requests: list[str] = []
        self.exits, self.refuse = exits, refuse

    def _find(self, ident: str) -> dict[str, Any] | None:
        ident = unquote(ident)
        by_name = next((c for c in self.containers.values() if c["Name"].lstrip("/") == ident), None)
        # Docker's own fallback: an ID prefix matches when no name does
        return (
            self.containers.get(ident)
            or by_name
            or next((c for i, c in self.containers.items() if i.startswith(ident)), None)
        )

    def get(self, url: str) -> tuple[int, Any]:
        self.requests.append(f"GET {url}")
        found = self._find(urlsplit(url).path.split("/")[2])
        return (200, found) if found else (404, {"message": "no such container"})

    def get_raw(self, url: str) -> tuple[int, bytes]:
        self.requests.append(f"GET {url}")
        return 200, b"".join(frame(line + "\n") for line in ["loading", "CUDA error: out of memory"])

    def send(self, method: str, url: str) -> tuple[int, Any]:
        self.requests.append(f"{method} {url}")
        if self.refuse:
            return 500, {"message": "driver failed programming external connectivity"}
        found = self._find(urlsplit(url).path.split("/")[2])
        if found["State"]["Running"]:
            return 304, None
        if self.exits is None:
            found["State"].update(Running=True, Status="running", StartedAt="2026-12-01T12:00:00Z")
        else:
            found["State"].update(Running=False, Status="exited", ExitCode=self.exits)
        return 204, None


def container(name: str = "vllm_dsv41", spec: str = SPEC, running: bool = False, rank: bool = True) -> dict:
    labels = {"dgxspark.cluster.spec_sha256": spec}
    if rank:
        labels["dgxspark.cluster.rank"] = "1"
    return {
        "Id": "0123abcd" * 8,
        "Name": "/" + name,
        "Image": "sha256:1",
        "Config": {"Image": "dgxspark-sim/engine:latest", "Labels": labels},
        "State": {"Running": running, "Status": "running" if running else "created", "ExitCode": 0},
    }


def test_a_created_rank_is_started_and_looked_at_again() -> None:
    engine = FakeEngine([container()])
    result = start_rank(engine, name="vllm_dsv41", spec_sha256=SPEC)
    assert result["changed"] is True and result["container"]["running"] is True
    assert result["container"]["started_at"] == "2026-12-01T12:00:00Z"
    assert [r.split("/")[0] for r in engine.requests] == ["GET ", "POST ", "GET "]


def test_a_running_rank_is_left_alone() -> None:
    engine = FakeEngine([container(running=True)])
    assert start_rank(engine, name="vllm_dsv41", spec_sha256=SPEC)["changed"] is False
    assert not [r for r in engine.requests if r.startswith("POST")]


def test_check_mode_starts_nothing() -> None:
    engine = FakeEngine([container()])
    assert start_rank(engine, name="vllm_dsv41", spec_sha256=SPEC, check_mode=True)["changed"] is True
    assert not [r for r in engine.requests if r.startswith("POST")]


def test_a_rank_that_exits_at_once_fails_with_its_exit_code_and_log_tail() -> None:
    engine = FakeEngine([container()], exits=1)
    with pytest.raises(RankStartError, match=r"exited right after its start \(exit code 1\)") as failed:
        start_rank(engine, name="vllm_dsv41", spec_sha256=SPEC)
    assert failed.value.record["log_tail"] == ["loading", "CUDA error: out of memory"]


@pytest.mark.parametrize(
    ("containers", "name", "match"),
    [
        ([], "vllm_dsv41", "no container vllm_dsv41 on this node"),
        ([container(spec="b" * 64)], "vllm_dsv41", "carries spec b+, the plan's is a+"),
        ([container(rank=False)], "vllm_dsv41", "the collection did not create it"),
        # an all-hex name that names no container: Docker answers with the container whose ID it prefixes
        ([container(name="other")], "0123abcd", "answered for other when asked for 0123abcd"),
    ],
)
def test_only_the_container_the_plan_created_is_started(containers, name, match) -> None:
    engine = FakeEngine(containers)
    with pytest.raises(RankStartError, match=match):
        start_rank(engine, name=name, spec_sha256=SPEC)
    assert not [r for r in engine.requests if r.startswith("POST")]


def test_a_refused_start_and_an_engine_that_cannot_be_asked_fail() -> None:
    with pytest.raises(RankStartError, match="refused to start it"):
        start_rank(FakeEngine([container()], refuse=True), name="vllm_dsv41", spec_sha256=SPEC)

    class Down(FakeEngine):
        def get(self, url: str) -> tuple[int, Any]:
            raise DockerEngineError("nothing answers on /var/run/docker.sock (dockerd is not running)")

    with pytest.raises(RankStartError, match="vllm_dsv41: the Docker engine could not be asked: nothing answers"):
        start_rank(Down([]), name="vllm_dsv41", spec_sha256=SPEC)
