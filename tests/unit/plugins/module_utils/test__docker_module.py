# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The docker_host option the Docker modules share, and the engine opened from it."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils import _docker_engine, _docker_module
from ansible_collections.dgxspark.cluster.plugins.module_utils._rank_stop import STOP_OPTIONS
from ansible_collections.dgxspark.cluster.plugins.modules import (
    node_facts,
    node_phase,
    rank_health,
    rank_stop,
    window_job,
)


class Failed(Exception):
    pass


class FakeModule:
    def __init__(self, docker_host: str) -> None:
        self.params = {"docker_host": docker_host}

    def fail_json(self, **result: Any) -> None:
        raise Failed(result["msg"])


class Closing:
    opened: list[Closing] = []

    def __init__(self, path: str, timeout: float) -> None:
        self.path, self.timeout, self.closed = path, timeout, False
        Closing.opened.append(self)

    def close(self) -> None:
        self.closed = True


@pytest.fixture(autouse=True)
def _closing_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    Closing.opened = []
    monkeypatch.setattr(_docker_engine, "DockerEngine", Closing)


def test_the_engine_is_the_sockets_and_closed_after_the_block_even_when_it_fails() -> None:
    with pytest.raises(RuntimeError), _docker_module.module_engine(FakeModule("unix:///run/d.sock"), 40.0) as engine:
        assert (engine.path, engine.timeout, engine.closed) == ("/run/d.sock", 40.0, False)
        raise RuntimeError("the block failed")
    assert [e.closed for e in Closing.opened] == [True]


def test_a_docker_host_that_is_not_a_socket_fails_the_module_before_any_engine() -> None:
    with pytest.raises(Failed, match="docker_host must be a unix:// socket URL"):
        with _docker_module.module_engine(FakeModule("tcp://10.0.0.1:2375"), 5.0):
            pass
    assert Closing.opened == []
    with pytest.raises(ValueError), _docker_engine.engine_at("tcp://10.0.0.1:2375", 5.0):
        pass


def test_every_docker_module_takes_the_one_docker_host_spec_and_a_stop_waits_past_its_timeout() -> None:
    for module in (node_facts, node_phase, rank_health, rank_stop, window_job):
        assert module.ARGUMENT_SPEC["docker_host"] is _docker_module.DOCKER_HOST["docker_host"], module.__name__
    assert node_phase.ARGUMENT_SPEC["stop_ranks"]["options"] is STOP_OPTIONS
    assert {k: rank_stop.ARGUMENT_SPEC[k] for k in STOP_OPTIONS} == STOP_OPTIONS
    assert _docker_engine.stop_wait(10) == 40.0
