# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.docker_args import (
    DOCKER_RUN_OPTIONS,
    FLAG,
    KEY,
    RENDERED,
    SHORT_OPTIONS,
    Ulimit,
    container_ulimits,
    host_path,
    option_values,
    parse_docker_args,
    parse_size,
    parse_ulimit,
    render_docker_args,
)
from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT


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
    "args",
    [["-e", "A=1"], ["-eA=1"], ["-e=A=1"], ["--env", "A=1"], ["--env=A=1"], ["-e", "B=2", "--env=A=1"]],
)
def test_every_spelling_of_an_option_reads_the_same(args: list[str]) -> None:
    # Docker's CLI (pflag): -e VALUE, -eVALUE, -e=VALUE, --env VALUE, --env=VALUE; option_values keeps the order
    options = parse_docker_args(args)
    assert options[-1].name == "--env" and options[-1].value == "A=1" and options[-1].known
    assert options[-1].end == len(args) and args[options[-1].index : options[-1].end] == options[-1].text.split(" ")
    assert option_values(args, "--env")[-1] == "A=1"
    # the renderer reads it as --env too (and refuses it: the environment is the shape's)
    problems = render_docker_args(args).problems
    assert [p.message for p in problems] == ["--env is not allowed here"] * len(options)


def test_short_switches_together_and_values_attached() -> None:
    options = parse_docker_args(["-it", "-m8g", "-d=false", "--init=false", "-Z", "x"])
    assert [(o.name, o.value, o.index, o.end) for o in options] == [
        ("--interactive", None, 0, 1),
        ("--tty", None, 0, 1),
        ("--memory", "8g", 1, 2),
        ("--detach", "false", 2, 3),
        ("--init", "false", 3, 4),
        ("-Z", None, 4, 5),  # no such short option: kept whole, unknown
        ("x", None, 5, 6),
    ]
    assert [o.known for o in options] == [True, True, True, True, True, False, False]


def test_reading_stops_at_the_image() -> None:
    argv = ["--name", "r", "--env", "A=1", "image:tag", "serve", "--env", "B=2"]
    assert [(o.name, o.value) for o in parse_docker_args(argv, until_image=True)] == [("--name", "r"), ("--env", "A=1")]
    assert [o.value for o in parse_docker_args(["--", "--env", "A=1"], until_image=True)] == []


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


@pytest.mark.parametrize("name", sorted(DOCKER_RUN_OPTIONS))
def test_every_option_renders_or_says_why_not(name: str) -> None:
    row = DOCKER_RUN_OPTIONS[name]
    if row.renders:
        assert row.parameter and row.expected, name
        assert row.example or not row.takes_value or row.kind == FLAG, name
        assert set(row.requires + row.conflicts) <= set(DOCKER_RUN_OPTIONS), name
        assert bool(row.requires or row.conflicts) == bool(row.why), name
    else:
        assert not row.parameter and len(row.refused) > 20, name


def test_the_table_is_dockers_list() -> None:
    # Docker CLI 28.2.2's `docker run --help`: 89 value options and 14 flags, every short form a long one.
    assert len(DOCKER_RUN_OPTIONS) == 103
    assert sum(not row.takes_value for row in DOCKER_RUN_OPTIONS.values()) == 14
    assert set(SHORT_OPTIONS.values()) <= set(DOCKER_RUN_OPTIONS)
    assert RENDERED == {name for name, row in DOCKER_RUN_OPTIONS.items() if row.renders}


def test_the_collections_own_parameters_are_never_set_by_an_option() -> None:
    # name, image, entrypoint, command, env, labels, state, detach, pull, auto_remove: the collection's alone;
    # restart_policy renders only as "no", the collection's own value.
    own = {"name", "image", "entrypoint", "command", "command_handling", "env", "labels", "state", "detach"}
    own |= {"pull", "auto_remove"}
    assert not own & {row.parameter for row in DOCKER_RUN_OPTIONS.values()}


RENDERS = {
    "add-host, both forms, IPv6 and host-gateway": (
        ["--add-host=a:10.0.0.1", "--add-host", "b=[fd00::2]", "--add-host=c:host-gateway"],
        {"etc_hosts": {"a": "10.0.0.1", "b": "fd00::2", "c": "host-gateway"}},
    ),
    "restart no": (["--restart=no"], {"restart_policy": "no"}),
    "pids limit": (["--pids-limit", "-1"], {"pids_limit": -1}),
    "flags and their =false": (
        ["--init", "--read-only=false", "--privileged=true", "--oom-kill-disable"],
        {"init": True, "read_only": False, "privileged": True, "oom_killer": True},
    ),
    "sizes as the module reads them": (
        ["--memory=8kb", "--memory-swap=-1", "--shm-size=1.5g", "--memory-reservation=512M"],
        {"memory": "8192", "memory_swap": "-1", "shm_size": "1.5g", "memory_reservation": "512M"},
    ),
    "a bind mount and a tmpfs mount": (
        [
            "--mount=type=bind,src=/models,dst=/models,ro,bind-propagation=rslave",
            '--mount=type=tmpfs,"target=/scratch",tmpfs-size=1gb,tmpfs-mode=1777',
        ],
        {
            "mounts": [
                {"type": "bind", "source": "/models", "target": "/models", "read_only": True, "propagation": "rslave"},
                {"type": "tmpfs", "target": "/scratch", "tmpfs_size": "1073741824", "tmpfs_mode": "1777"},
            ]
        },
    ),
    "a volume mount with labels and options": (
        ["--mount", "target=/cache,volume-label=a=1,volume-opt=o=bind,volume-nocopy"],
        {
            "mounts": [
                {
                    "type": "volume",
                    "target": "/cache",
                    "labels": {"a": "1"},
                    "volume_options": {"o": "bind"},
                    "no_copy": True,
                }
            ]
        },
    ),
    "bind-recursive": (
        ["--mount=type=bind,source=/a,target=/a,bind-recursive=readonly"],
        {"mounts": [{"type": "bind", "source": "/a", "target": "/a", "read_only_force_recursive": True}]},
    ),
    "device rates": (
        ["--device-read-bps=/dev/nvme0n1:1mb", "--device-write-iops", "/dev/nvme0n1:200"],
        {
            "device_read_bps": [{"path": "/dev/nvme0n1", "rate": "1048576"}],
            "device_write_iops": [{"path": "/dev/nvme0n1", "rate": 200}],
        },
    ),
    "a health check": (
        ["--health-cmd", "curl -f http://127.0.0.1:8000/health", "--health-interval=1m30s", "--health-retries=3"],
        {
            "healthcheck": {
                "test": ["CMD-SHELL", "curl -f http://127.0.0.1:8000/health"],
                "interval": "1m30s",
                "retries": 3,
            }
        },
    ),
    "a health interval alone keeps the image's test": (
        ["--health-timeout=5s"],
        {"healthcheck": {"timeout": "5s", "test_cli_compatible": True}},
    ),
    "no health check": (["--no-healthcheck"], {"healthcheck": {"test": ["NONE"]}}),
    "maps repeat": (
        ["--log-driver=json-file", "--log-opt=max-size=10m", "--log-opt", "max-file=3", "--storage-opt=size=1G"],
        {
            "log_driver": "json-file",
            "log_options": {"max-size": "10m", "max-file": "3"},
            "storage_opts": {"size": "1G"},
        },
    ),
    "IPC sysctls without the host's IPC namespace": (
        ["--ipc=private", "--sysctl=kernel.shm_rmid_forced=1", "--sysctl", "fs.mqueue.msg_max=64"],
        {"ipc_mode": "private", "sysctls": {"kernel.shm_rmid_forced": "1", "fs.mqueue.msg_max": "64"}},
    ),
    "short options": (
        ["-m", "16g", "-u", "1000", "-h", "rank0", "-w", "/work", "-c", "512", "-v", "/a:/a:ro,rslave"],
        {"memory": "16g", "user": "1000", "hostname": "rank0", "working_dir": "/work", "cpu_shares": 512},
    ),
}


@pytest.mark.parametrize("args,expected", RENDERS.values(), ids=RENDERS.keys())
def test_render(args: list[str], expected: dict[str, Any]) -> None:
    rendered = render_docker_args(args)
    assert rendered.problems == []
    assert {key: rendered.params[key] for key in expected} == expected


REFUSES = {
    "a restart policy": (["--restart=always"], 0, "bad --restart: automatic restarts"),
    "on-failure too": (["--restart", "on-failure:3"], 0, "the collection never restarts a rank"),
    "an option the collection renders": (["--env-file=/etc/x"], 0, "--env-file is not allowed here"),
    "publishing on the host's network": (["-p", "8000:8000"], 0, "--publish is not allowed here"),
    "a Windows option": (["--isolation=hyperv"], 0, "a Windows container option"),
    "a flag that is not a bool": (["--init=maybe"], 0, "bad --init: 'maybe' is not true or false"),
    "an empty value": (["--ipc="], 0, "--ipc needs a value"),
    "a value at the end": (["--memory"], 0, "--memory needs a value"),
    "a namespace Docker does not know": (["--ipc=hots"], 0, "bad --ipc: 'hots' is not a mode"),
    "a mount key nobody renders": (["--mount=type=bind,source=/a,target=/a,bind-create-src"], 0, "'bind-create-src'"),
    "a bind mount without a source": (["--mount=type=bind,target=/a"], 0, "a bind mount needs source="),
    "a mount without a target": (["--mount=type=volume,source=v"], 0, "target=/CONTAINER-PATH is needed"),
    "a mount key of another type": (
        ["--mount=type=bind,source=/a,target=/a,tmpfs-size=1g"],
        0,
        "tmpfs-size is for a tmpfs",
    ),
    "a tmpfs mode that is not octal": (["--mount=type=tmpfs,target=/t,tmpfs-mode=999"], 0, "an octal mode"),
    "two mounts on one path": (
        ["--volume=/m:/models", "--mount=type=bind,source=/n,target=/models"],
        1,
        "mounted twice",
    ),
    "a relative volume target": (["--volume=/m:models"], 0, "absolute container path"),
    "a volume mode the module refuses": (["--volume=/m:/m:rx"], 0, "modes are among"),
    "a device with bad permissions": (["--device=/dev/a:/dev/a:rwx"], 0, "letters of rwm"),
    "a host that is not an address": (["--add-host=a:somewhere"], 0, "'somewhere' is not an IP address"),
    "a DNS server that is not an address": (["--dns=resolver"], 0, "bad --dns"),
    "an exposed port out of range": (["--expose=70000"], 0, "PORT[-PORT]"),
    "a seccomp profile file": (["--security-opt", "seccomp=/etc/profile.json"], 0, "reads a seccomp profile file"),
    "two capabilities in one option": (["--cap-add=IPC_LOCK,SYS_NICE"], 0, "one capability per option"),
    "a GPU request Docker's shorthand lacks": (["--gpus=some"], 0, "expected all, a count or device=<ids>"),
    "a Go duration the module cannot read": (["--health-interval=1.5s"], 0, "expected a duration"),
    "a size the module cannot read": (["--shm-size=16x"], 0, "bad --shm-size"),
    "negative memory": (["--memory=-1"], 0, "bad --memory"),
    "an out-of-range integer": (["--oom-score-adj=-2000"], 0, "outside -1000..1000"),
    "cpus and a CFS quota": (["--cpus=4", "--cpu-quota=400000"], 0, "--cpus together with --cpu-quota"),
    "no health check with a health option": (
        ["--no-healthcheck", "--health-interval=30s"],
        0,
        "--no-healthcheck together with --health-interval",
    ),
    "no health check =false": (["--no-healthcheck=false"], 0, "write --no-healthcheck alone"),
    "swap without memory": (["--memory-swap=16g"], 0, "--memory-swap without --memory"),
    "log options without a driver": (["--log-opt=max-size=1m"], 0, "applies log options only with a log driver"),
    "a net sysctl on the host's network": (
        ["--network=host", "--sysctl=net.core.somaxconn=1024"],
        1,
        "the rank shares the host's network namespace (--network=host)",
    ),
    "an IPC sysctl on the host's IPC": (["--ipc=host", "--sysctl=kernel.sem=1 2 3 4"], 1, "host's IPC namespace"),
    "a sysctl with no namespace": (["--sysctl=vm.swappiness=0"], 0, "not in a namespace of its own"),
}


@pytest.mark.parametrize("args,index,fragment", REFUSES.values(), ids=REFUSES.keys())
def test_refuse(args: list[str], index: int, fragment: str) -> None:
    problems = render_docker_args(args).problems
    assert len(problems) == 1, problems
    problem = problems[0]
    text = f"{problem.message} {problem.found} {problem.expected} {problem.hint}"
    assert problem.index == index and problem.option in problem.message and fragment in text, problem


@pytest.mark.parametrize("name", sorted(n for n, row in DOCKER_RUN_OPTIONS.items() if not row.renders))
def test_did_you_mean_never_suggests_an_option_that_cannot_render(name: str) -> None:
    for typo in {name[:-1], name + "s", name.replace("-", "_")} - set(DOCKER_RUN_OPTIONS):
        (problem,) = render_docker_args([f"{typo}=1"]).problems
        assert problem.message == "not a `docker run` option"
        suggested = problem.hint.removeprefix("did you mean '").removesuffix("'?")
        assert not problem.hint or suggested in RENDERED, (typo, problem.hint)


def test_the_documentation_lists_every_option_as_the_table_does() -> None:
    lines = (ROOT / "docs" / "profile.md").read_text(encoding="utf-8").splitlines()
    documented = {line.split(" | ")[0].strip("| `"): line for line in lines if line.startswith("| `--")}
    assert sorted(documented) == sorted(DOCKER_RUN_OPTIONS)
    for name, row in DOCKER_RUN_OPTIONS.items():
        if not row.renders:
            expected = f"| `{name}` | refused: {row.refused} |"
        else:
            parameter = f"`{row.parameter}.{row.key}`" if row.kind == KEY else f"`{row.parameter}`"
            example = f" (`{name}={row.example}`)" if row.takes_value else ""
            expected = f"| `{name}` | {parameter}{example} |"
        assert documented[name] == expected


@pytest.mark.parametrize(
    "args,inside,expected",
    [
        # spark8: /models bound read-only, the model one directory down
        (["--volume=/models:/models:ro"], "/models/DeepSeek-V4.1-Flash", "/models/DeepSeek-V4.1-Flash"),
        (["-v", "/mnt/head-models:/models:ro"], "/models/DeepSeek-V4.1-Flash", "/mnt/head-models/DeepSeek-V4.1-Flash"),
        # the bind that holds it most closely wins, wherever it is in the list
        (
            ["-v", "/srv/engram/x:/models/x:ro", "--volume=/models:/models:ro"],
            "/models/x/rows",
            "/srv/engram/x/rows",
        ),
        (["--mount", "type=bind,source=/data/engram,target=/engram-local,readonly"], "/engram-local", "/data/engram"),
        (["--volume=/models:/models/:ro"], "/models/", "/models"),
        (["--volume=models:/models"], "/models/x", None),  # a named volume: not a node's path
        (["--mount", "type=volume,source=models,target=/models"], "/models/x", None),
        (["--volume=/models:/models:ro"], "deepseek-ai/DeepSeek-V4.1-Flash-1017", None),  # a hub id
        (["--volume=/models:/models:ro"], "/opt/model", None),
    ],
)
def test_host_path_follows_a_container_path_through_the_binds(
    args: list[str], inside: str, expected: str | None
) -> None:
    found = host_path(args, inside)
    assert (found[0] if found else None) == expected
