# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._docker_args import (
    Ulimit,
    container_ulimits,
    parse_docker_args,
    parse_size,
    parse_ulimit,
)


def test_parse_forms() -> None:
    options = parse_docker_args(["--ulimit=memlock=-1:-1", "--ipc", "host", "-e", "A=1", "--rm", "--bogus=1"])
    assert [(o.name, o.value, o.index, o.known) for o in options] == [
        ("--ulimit", "memlock=-1:-1", 0, True),
        ("--ipc", "host", 1, True),
        ("--env", "A=1", 3, True),
        ("--rm", None, 5, True),
        ("--bogus", "1", 6, False),
    ]


@pytest.mark.parametrize(
    "text,name,limit",
    [
        ("memlock=-1:-1", "memlock", Ulimit(-1, -1)),
        ("nofile=1048576", "nofile", Ulimit(1048576, 1048576)),
        ("stack=67108864:67108864", "stack", Ulimit(67108864, 67108864)),
        ("nofile=1024:-1", "nofile", Ulimit(1024, -1)),
    ],
)
def test_parse_ulimit(text: str, name: str, limit: Ulimit) -> None:
    assert parse_ulimit(text) == (name, limit)


@pytest.mark.parametrize("text", ["core", "nofile=a", "nofile=10:5", "nofile=-1:5", "=1", "nofile=-2"])
def test_parse_ulimit_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_ulimit(text)


@pytest.mark.parametrize(
    "text,value",
    [
        ("112g", 112 * 1024**3),
        ("16G", 16 * 1024**3),
        ("512m", 512 * 1024**2),
        ("1024", 1024),
        ("1.5g", int(1.5 * 1024**3)),
        ("8kb", 8192),
    ],
)
def test_parse_size(text: str, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "g", "lots", "12x"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_size(text)


def test_later_ulimit_wins() -> None:
    limits = container_ulimits(["--ulimit=nofile=1024", "--ulimit", "nofile=1048576:1048576", "--ulimit=core"])
    assert limits == {"nofile": Ulimit(1048576, 1048576)}
