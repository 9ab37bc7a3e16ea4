# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_phase: the helpers paused or resumed and the guard's phase switched in one round trip, in the
runbook's order, every step run whatever the other did (the undo's need), nothing changed in check mode."""

from __future__ import annotations

import json
import os
import pathlib
import re
import stat
from types import SimpleNamespace
from typing import Any

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.dgxspark.cluster.plugins.module_utils._rank_start import RankStartError
from ansible_collections.dgxspark.cluster.plugins.module_utils._rank_stop import RankStopError
from ansible_collections.dgxspark.cluster.plugins.module_utils._unit_names import (
    not_unit_names,
    refused_helper,
    refused_helpers,
)
from ansible_collections.dgxspark.cluster.plugins.modules import node_phase
from ansible_collections.dgxspark.cluster.plugins.modules.node_phase import Node, run
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.schema import UNIT_NAME
from ansible_collections.dgxspark.cluster.tests.unit.conftest import FIXTURES

PARAMS = {
    "helpers": [],
    "guard_phase": None,
    "guard_clear": False,
    "rank_container": None,
    "mem_available_min_gib": None,
    "start_rank": False,
    "spec_sha256": None,
    "journal": "",  # none, but in the journal's own tests (they give a path under tmp_path)
    "journal_by": "",
    "stop_ranks": None,
}
STOP = {"remove": True, "stop_timeout": 10, "save_dir": "/var/log/dgxspark-cluster/ranks", "log_lines": 20}


class FakeNode:
    """systemctl and the guard's command as a node answers them; ``calls`` keeps their order."""

    def __init__(
        self, units: dict[str, str], guard: dict[str, Any] | None, stuck: tuple[str, ...] = (), free: int = 0
    ) -> None:
        self.units, self.state, self.stuck, self.calls, self.free = dict(units), guard, stuck, [], free
        self.ranks: dict[str, str] | None = {}

    def mem_available(self) -> int | None:
        self.calls.append(("meminfo",))
        # each helper stopped gives back 10 GiB
        return self.free + 10 * 1024**3 * sum(1 for s in self.units.values() if s == "inactive")

    def states(self, units: list[str]) -> dict[str, str | None]:
        return {u: self.units.get(u, "inactive") for u in units}

    def systemctl(self, verb: str, units: list[str]) -> None:
        self.calls.append((verb, *units))
        for unit in units:
            if unit not in self.stuck:
                self.units[unit] = "inactive" if verb == "stop" else "active"

    def rank(self, container: str) -> dict[str, Any]:
        self.calls.append(("rank", container))
        return {"exists": True, "running": True, "status": "running"}

    def stop(self, remove: bool, stop_timeout: int, save_dir: str | None, log_lines: int) -> dict[str, Any]:
        self.calls.append(("stop-ranks", remove, stop_timeout, save_dir, log_lines))
        if self.ranks is None:
            raise RankStopError("the Docker engine could not be asked: connection refused")
        running = [name for name, state in self.ranks.items() if state == "running"]
        records = [
            {"name": name, "was_running": state == "running", "removed": remove} for name, state in self.ranks.items()
        ]
        names = list(self.ranks)
        self.ranks = {} if remove else dict.fromkeys(names, "exited")
        return {"ranks": records, "stopped": running, "removed": names if remove else [], "changed": bool(names)}

    def start(self, container: str, spec_sha256: str) -> dict[str, Any]:
        self.calls.append(("start-rank", container, spec_sha256))
        if spec_sha256 != "planned":
            raise RankStartError(f"{container} carries spec other, the plan's is {spec_sha256}", {"name": container})
        return {"changed": True, "container": {"name": container, "running": True}}

    def guard(self, *words: str) -> dict[str, Any]:
        self.calls.append(("guard", *words))
        if self.state is None:
            raise OSError("the memory guard does not answer (connection refused)")
        if words[0] == "phase":
            changed = self.state["phase"] != words[1]
            self.state = {**self.state, "phase": words[1]}
            return {"ok": True, "changed": changed, "state": self.state}
        if words[0] == "clear":
            self.state = {**self.state, "tripped": None}
        return {"ok": True, "state": self.state}


def module(check_mode: bool = False, **params: Any) -> SimpleNamespace:
    return SimpleNamespace(params={**PARAMS, **params}, check_mode=check_mode)


def test_pause_stops_the_running_helpers_then_arms_the_guard() -> None:
    node = FakeNode({"comfy.service": "active", "ollama.service": "inactive"}, {"phase": "idle", "tripped": None})
    result = run(
        module(helpers=["comfy.service", "ollama.service"], helpers_state="stopped", guard_phase="startup"), node
    )
    assert node.calls == [("stop", "comfy.service"), ("meminfo",), ("guard", "phase", "startup")]
    assert result["changed"] and result["guard_changed"] and result["errors"] == []
    assert result["helpers"]["comfy.service"] == {"before": "active", "after": "inactive"}
    assert result["guard"]["phase"] == "startup"


def test_steady_switches_the_guard_first_then_resumes() -> None:
    node = FakeNode({"comfy.service": "inactive"}, {"phase": "startup", "tripped": None})
    result = run(module(helpers=["comfy.service"], helpers_state="started", guard_phase="steady"), node)
    assert node.calls == [("guard", "phase", "steady"), ("start", "comfy.service")]
    assert result["helpers"]["comfy.service"]["after"] == "active" and not result["errors"]


def test_a_second_run_changes_nothing() -> None:
    node = FakeNode({"comfy.service": "active"}, {"phase": "steady", "tripped": None})
    result = run(module(helpers=["comfy.service"], helpers_state="started", guard_phase="steady"), node)
    assert not result["changed"] and node.calls == [("guard", "phase", "steady")]


def test_the_undo_resumes_the_helpers_when_the_guard_does_not_answer() -> None:
    node = FakeNode({"comfy.service": "inactive"}, None)
    result = run(module(helpers=["comfy.service"], helpers_state="started", guard_phase="idle"), node)
    assert node.units["comfy.service"] == "active"
    assert result["errors"] == ["guard: the memory guard does not answer (connection refused)"]


def test_a_helper_that_does_not_stop_is_an_error() -> None:
    node = FakeNode({"comfy.service": "active"}, {"phase": "idle", "tripped": None}, stuck=("comfy.service",))
    result = run(module(helpers=["comfy.service"], helpers_state="stopped", guard_phase="startup"), node)
    assert result["errors"] == ["helpers: comfy.service not stopped (active)"]
    assert result["guard"]["phase"] == "startup"  # the guard is armed all the same


def test_a_trip_is_cleared_only_when_asked_and_only_when_tripped() -> None:
    tripped = {"phase": "steady", "tripped": {"reason": "low"}}
    node = FakeNode({}, tripped)
    result = run(module(helpers_state="stopped", guard_phase="startup", guard_clear=True), node)
    assert node.calls == [("meminfo",), ("guard", "status"), ("guard", "clear"), ("guard", "phase", "startup")]
    assert result["guard"]["tripped"] is None
    node = FakeNode({}, {"phase": "idle", "tripped": None})
    run(module(helpers_state="stopped", guard_phase="startup", guard_clear=True), node)
    assert ("guard", "clear") not in node.calls
    node = FakeNode({}, tripped)
    assert run(module(helpers_state="stopped", guard_phase="startup"), node)["guard"]["tripped"] == {"reason": "low"}


def test_check_mode_changes_nothing_and_says_what_would_change() -> None:
    node = FakeNode({"comfy.service": "active"}, {"phase": "idle", "tripped": None})
    result = run(
        module(check_mode=True, helpers=["comfy.service"], helpers_state="stopped", guard_phase="startup"), node
    )
    assert node.calls == [("guard", "status")] and node.units == {"comfy.service": "active"}
    assert result["changed"] and result["guard_changed"]
    assert result["helpers"]["comfy.service"] == {"before": "active", "after": "inactive"}


def test_nothing_asked_nothing_done() -> None:
    node = FakeNode({}, {"phase": "idle", "tripped": None})
    assert run(module(helpers_state="started"), node) == {
        "changed": False,
        "helpers": {},
        "guard": None,
        "guard_changed": False,
        "errors": [],
        "journal": {"path": None, "found": None, "error": None, "resumed": [], "written": False, "closed": False},
    }


def test_steady_looks_at_the_rank_last() -> None:
    node = FakeNode({"comfy.service": "inactive"}, {"phase": "startup", "tripped": None})
    result = run(
        module(helpers=["comfy.service"], helpers_state="started", guard_phase="steady", rank_container="vllm"), node
    )
    assert node.calls == [("guard", "phase", "steady"), ("start", "comfy.service"), ("rank", "vllm")]
    assert result["rank"]["status"] == "running"


def test_memavailable_is_read_again_once_the_helpers_stopped() -> None:
    """Seed 000: the helpers are paused so that their memory comes back for the load; under the floor after
    the pause, the step fails (the boot's undo resumes them), and the guard is armed all the same."""
    node = FakeNode({"comfy.service": "active", "ollama.service": "active"}, {"phase": "idle", "tripped": None})
    params = {"helpers": ["comfy.service", "ollama.service"], "helpers_state": "stopped", "guard_phase": "startup"}
    result = run(module(**params, mem_available_min_gib=15), node)
    assert result["mem_available_bytes"] == 20 * 1024**3 and result["errors"] == []
    node = FakeNode({"comfy.service": "active"}, {"phase": "idle", "tripped": None}, free=2 * 1024**3)
    result = run(module(**{**params, "helpers": ["comfy.service"]}, mem_available_min_gib=100), node)
    assert result["errors"] == [
        "memory: MemAvailable 12.0 GiB once the helpers stopped, under the 100 GiB a rank needs to start "
        "(host.min_mem_available_gib; seed 000, 'Boot order and pre-flight': 'at least 100 GiB MemAvailable on "
        "every node'; its host kernel 'lets helpers be paused and their memory released during load')"
    ]
    assert result["guard"]["phase"] == "startup"


def test_check_mode_clearing_alone_changes_only_a_tripped_guard() -> None:
    """Asked only to clear (no phase), check mode says a change only when the guard is tripped."""
    for tripped, would in ((None, False), ({"reason": "low"}, True)):
        node = FakeNode({}, {"phase": "steady", "tripped": tripped})
        result = run(module(check_mode=True, helpers_state="stopped", guard_clear=True), node)
        assert (result["guard_changed"], result["changed"]) == (would, would), tripped


def test_the_start_phase_pauses_arms_then_starts_the_rank_in_one_round_trip() -> None:
    node = FakeNode({"comfy.service": "active"}, {"phase": "idle", "tripped": None}, free=100 * 1024**3)
    params = {"helpers": ["comfy.service"], "helpers_state": "stopped", "guard_phase": "startup"}
    rank = {"rank_container": "vllm_dsv41", "start_rank": True, "spec_sha256": "planned"}
    result = run(module(**params, **rank, mem_available_min_gib=100), node)
    assert node.calls == [
        ("stop", "comfy.service"),
        ("meminfo",),
        ("guard", "phase", "startup"),
        ("start-rank", "vllm_dsv41", "planned"),
        ("rank", "vllm_dsv41"),
    ]
    assert result["changed"] and not result["errors"]
    assert result["rank_started"] == {"changed": True, "container": {"name": "vllm_dsv41", "running": True}}


def test_a_rank_never_starts_after_a_step_that_failed_nor_when_it_is_not_the_plans() -> None:
    node = FakeNode({"comfy.service": "active"}, {"phase": "idle", "tripped": None}, free=0)
    rank = {"rank_container": "vllm_dsv41", "start_rank": True, "spec_sha256": "planned"}
    result = run(module(helpers=["comfy.service"], helpers_state="stopped", mem_available_min_gib=100, **rank), node)
    assert result["errors"][0].startswith("memory: MemAvailable 10.0 GiB once the helpers stopped")
    assert result["rank_started"] is None and not [c for c in node.calls if c[0] == "start-rank"]
    node = FakeNode({}, {"phase": "idle", "tripped": None})
    result = run(module(helpers_state="stopped", guard_phase="startup", **{**rank, "spec_sha256": "stale"}), node)
    assert result["errors"] == ["rank: vllm_dsv41 carries spec other, the plan's is stale"]
    assert result["rank_started"] == {"changed": False, "container": {"name": "vllm_dsv41"}}


# ----------------------------------------------------------------------------- the boot's journal


def test_a_pause_writes_the_journal_before_it_stops_anything(tmp_path) -> None:
    path = tmp_path / "cluster" / "boot-journal.json"

    class Watching(FakeNode):
        def systemctl(self, verb: str, units: list[str]) -> None:
            # the journal is on disk before the first helper stops
            assert json.loads(path.read_text())["helpers"] == ["comfy.service"]
            super().systemctl(verb, units)

    node = Watching({"comfy.service": "active"}, {"phase": "idle", "tripped": None})
    params = {"helpers": ["comfy.service"], "helpers_state": "stopped", "guard_phase": "startup"}
    result = run(
        module(
            journal=str(path),
            journal_by="ops@ctl",
            rank_container="vllm",
            start_rank=True,
            spec_sha256="planned",
            **params,
        ),
        node,
    )
    assert result["errors"] == [] and result["journal"]["written"] is True and result["journal"]["found"] is None
    entry = json.loads(path.read_text())
    assert entry["helpers"] == ["comfy.service"] and entry["guard_phase"] == "startup" and entry["rank"] == "vllm"
    assert entry["by"] == "ops@ctl" and entry["opened_at"] == entry["updated_at"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700


def test_a_resume_also_resumes_what_an_interrupted_boot_paused_then_closes_the_journal(tmp_path) -> None:
    path = tmp_path / "boot-journal.json"
    path.write_text(json.dumps({"opened_at": "2026-12-02T03:00:00Z", "helpers": ["comfy.service", "ollama.service"]}))
    node = FakeNode({"comfy.service": "inactive", "ollama.service": "inactive"}, {"phase": "startup", "tripped": None})
    result = run(
        module(journal=str(path), helpers=["comfy.service"], helpers_state="started", guard_phase="idle"), node
    )
    assert node.calls == [("guard", "phase", "idle"), ("start", "comfy.service", "ollama.service")]
    assert result["journal"]["resumed"] == ["ollama.service"] and result["journal"]["closed"] is True
    assert result["journal"]["found"]["opened_at"] == "2026-12-02T03:00:00Z"
    assert not path.exists() and result["changed"] is True


def test_a_resume_that_fails_keeps_the_journal(tmp_path) -> None:
    path = tmp_path / "boot-journal.json"
    path.write_text(json.dumps({"helpers": ["comfy.service"]}))
    node = FakeNode({"comfy.service": "inactive"}, {"phase": "startup", "tripped": None}, stuck=("comfy.service",))
    result = run(module(journal=str(path), helpers_state="started", guard_phase="idle"), node)
    assert result["errors"] == ["helpers: comfy.service not started (inactive)"]
    assert result["journal"]["closed"] is False and path.exists()


def test_check_mode_reads_the_journal_and_writes_nothing(tmp_path) -> None:
    path = tmp_path / "boot-journal.json"
    node = FakeNode({"comfy.service": "active"}, {"phase": "idle", "tripped": None})
    paused = run(module(True, journal=str(path), helpers=["comfy.service"], helpers_state="stopped"), node)
    assert paused["journal"]["written"] is False and not path.exists()
    path.write_text(json.dumps({"helpers": ["comfy.service"]}))
    resumed = run(module(True, journal=str(path), helpers_state="started"), node)
    assert resumed["journal"]["closed"] is False and resumed["changed"] is True and path.exists()


def test_an_unreadable_journal_is_said_and_closed_by_a_resume(tmp_path) -> None:
    path = tmp_path / "boot-journal.json"
    path.write_text("{half")
    node = FakeNode({}, {"phase": "startup", "tripped": None})
    result = run(module(journal=str(path), helpers_state="started", guard_phase="idle"), node)
    assert result["journal"]["error"].startswith(f"{path}: ") and result["journal"]["closed"] is True


def test_stop_ranks_stops_every_rank_first_then_the_guard_idles_and_the_helpers_resume() -> None:
    """stop.yml's one round trip per node: the ranks (by label), then the guard to idle, then the helpers."""
    node = FakeNode({"comfy.service": "inactive"}, {"phase": "steady", "tripped": None})
    node.ranks = {"vllm_dsv41": "running"}
    result = run(module(helpers=["comfy.service"], helpers_state="started", guard_phase="idle", stop_ranks=STOP), node)
    assert node.calls == [
        ("stop-ranks", True, 10, "/var/log/dgxspark-cluster/ranks", 20),
        ("guard", "phase", "idle"),
        ("start", "comfy.service"),
    ]
    assert result["ranks_stopped"]["stopped"] == ["vllm_dsv41"] and result["ranks_stopped"]["removed"] == ["vllm_dsv41"]
    assert result["changed"] and not result["errors"] and node.ranks == {}


def test_stop_ranks_on_a_node_with_nothing_left_changes_nothing() -> None:
    node = FakeNode({}, {"phase": "idle", "tripped": None})
    result = run(module(helpers_state="started", guard_phase="idle", stop_ranks=STOP), node)
    assert not result["changed"] and result["ranks_stopped"] == {"ranks": [], "stopped": [], "removed": []}


def test_an_engine_that_cannot_be_asked_fails_the_stop_but_the_guard_and_helpers_still_run() -> None:
    """ "Nothing serves" is only said once checked: the error names the engine, and the other steps still run."""
    node = FakeNode({"comfy.service": "inactive"}, {"phase": "steady", "tripped": None})
    node.ranks = None
    result = run(module(helpers=["comfy.service"], helpers_state="started", guard_phase="idle", stop_ranks=STOP), node)
    assert result["ranks_stopped"] is None
    assert result["errors"] == ["ranks: the Docker engine could not be asked: connection refused"]
    assert node.state["phase"] == "idle" and node.units["comfy.service"] == "active"


def test_without_stop_ranks_no_rank_is_stopped() -> None:
    node = FakeNode({}, {"phase": "steady", "tripped": None})
    node.ranks = {"vllm_dsv41": "running"}
    result = run(module(helpers_state="started", guard_phase="idle"), node)
    assert "ranks_stopped" not in result and node.ranks == {"vllm_dsv41": "running"}


# ----------------------------------------------------------------------------- the helpers' names

# The bad-input corpus's unit names (what the profile's schema refuses), and more that systemctl must never see:
# an option, a path, whitespace or a line break, globs, a unit of another type, nothing at all.
CORPUS_UNITS = [
    case["found"]
    for case in (json.loads(path.read_text()) for path in sorted((FIXTURES / "bad-inputs").glob("*.json")))
    if case["class"] == "systemd unit name"
]
NOT_UNIT_NAMES = CORPUS_UNITS + [
    "--now",
    "-.service",
    ".service",
    "/etc/systemd/system/comfy.service",
    "../comfy.service",
    "comfy service",
    "comfy.service\n",
    "comfy\tui.service",
    "comfy?.service",
    "comfy[12].service",
    "ollama.mount",
    "ollama.service.d",
    "",
]


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


@pytest.fixture
def systemctl_calls(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """AnsibleModule's exits raise, and its run_command only records: a command the module runs is in the list."""
    calls: list[Any] = []

    def exit_json(self: Any, **kwargs: Any) -> None:
        raise ExitJson(kwargs)

    def fail_json(self: Any, **kwargs: Any) -> None:
        raise FailJson(kwargs)

    def run_command(self: Any, args: Any, **kwargs: Any) -> tuple[int, str, str]:
        calls.append(args)
        return 0, "", ""

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *args, **kwargs: f"/usr/bin/{name}")
    return calls


def test_the_corpus_has_unit_names() -> None:
    assert {"*.service", "-H.service", "ollama", "--force.service"} <= set(CORPUS_UNITS)


@pytest.mark.parametrize("name", NOT_UNIT_NAMES)
def test_a_helper_name_off_the_allow_list_is_refused_before_systemctl(
    name: str, systemctl_calls: list[Any], tmp_path: pathlib.Path
) -> None:
    journal = tmp_path / "boot-journal.json"
    args = {"helpers": ["comfyui.service", name], "helpers_state": "stopped", "guard_phase": "startup"}
    with patch_module_args({**args, "journal": str(journal)}), pytest.raises(FailJson) as failed:
        node_phase.main()
    message = failed.value.args[0]["msg"]
    assert message.startswith(f"helpers: not unit names: {name!r} (expected a unit name such as ollama.service")
    assert systemctl_calls == []  # nothing run on the node: no systemctl, no guard command
    assert not journal.exists()  # and no journal written


@pytest.mark.parametrize("name", NOT_UNIT_NAMES)
def test_the_schema_and_the_module_share_the_allow_list(name: str) -> None:
    assert re.fullmatch(UNIT_NAME, name) is None
    assert not_unit_names(["comfyui.service", name]) == [name]


# Units the node runs on (issue 26): a boot never pauses them, whatever the profile or the journal says.
NEVER_HELPERS = [
    "ssh.service",
    "sshd.service",
    "ssh.socket",
    "sshd@1-192.0.2.5:22.service",
    "docker.service",
    "docker.socket",
    "containerd.service",
    "dgxspark-memguard.service",
    "systemd-journald.service",
    "systemd-networkd.socket",
    "systemd-logind.service",
    "dbus.service",
    "dbus-broker.service",
    "NetworkManager.service",
]


@pytest.mark.parametrize("name", NEVER_HELPERS)
def test_a_service_the_node_runs_on_is_never_paused(
    name: str, systemctl_calls: list[Any], tmp_path: pathlib.Path
) -> None:
    journal = tmp_path / "boot-journal.json"
    args = {"helpers": ["comfyui.service", name], "helpers_state": "stopped", "guard_phase": "startup"}
    with patch_module_args({**args, "journal": str(journal)}), pytest.raises(FailJson) as failed:
        node_phase.main()
    message = failed.value.args[0]["msg"]
    assert message.startswith(f"helpers: never paused: {name!r} (")
    assert systemctl_calls == [] and not journal.exists()
    assert refused_helpers(["comfyui.service", name, "ollama.service"]) == [(name, refused_helper(name))]


@pytest.mark.parametrize(
    "name",
    ["ollama.service", "comfyui.service", "sshguard.service", "docker-prune.timer", "dgxspark-sim-helper.service"],
)
def test_a_helper_that_only_shares_a_prefix_is_not_refused(name: str) -> None:
    assert refused_helper(name) == ""


def test_the_guard_s_unit_is_the_one_the_memguard_role_installs() -> None:
    from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.memguard import UNIT_NAME as GUARD_UNIT

    assert refused_helper(GUARD_UNIT).startswith("the memory guard")


@pytest.mark.parametrize(
    "name", ["comfyui.service", "ollama@gpu0.service", "backup.timer", "avahi-daemon.socket", "a:b.service"]
)
def test_a_unit_name_on_the_allow_list_reaches_systemctl(name: str, systemctl_calls: list[Any]) -> None:
    with patch_module_args({"helpers": [name], "helpers_state": "stopped", "journal": ""}), pytest.raises(FailJson):
        node_phase.main()  # the recording run_command answers nothing systemctl show would: a step fails
    assert systemctl_calls and systemctl_calls[0][:3] == ["/usr/bin/timeout", "--kill-after=5", "90"]
    assert systemctl_calls[0][3:5] == ["/usr/bin/systemctl", "show"] and systemctl_calls[0][-2:] == ["--", name]


def test_a_journal_that_lists_what_is_not_a_unit_name_never_hands_it_to_systemctl(tmp_path: pathlib.Path) -> None:
    """A journal on the node is written by node_phase from checked names; one edited by hand is checked again."""
    path = tmp_path / "boot-journal.json"
    path.write_text(json.dumps({"helpers": ["ollama.service", "-H.service", "*.service", "ollama"]}))
    node = FakeNode({"ollama.service": "inactive"}, {"phase": "startup", "tripped": None})
    result = run(module(journal=str(path), helpers_state="started", guard_phase="idle"), node)
    assert node.calls == [("guard", "phase", "idle"), ("start", "ollama.service")]
    assert result["journal"]["resumed"] == ["ollama.service"]
    assert result["errors"] == [
        f"journal: {path} lists what are not unit names, left out: '-H.service', '*.service', 'ollama' "
        "(expected a unit name such as ollama.service (not starting with -))"
    ]
    assert result["journal"]["closed"] is False and path.exists()  # kept for someone to look at


def test_the_node_refuses_what_is_not_a_unit_name_itself(systemctl_calls: list[Any]) -> None:
    """The last line before systemctl's argv, whatever called it."""
    node = Node(SimpleNamespace(params={"timeout": 5}, get_bin_path=lambda name, *a, **k: f"/usr/bin/{name}"))
    with pytest.raises(ValueError, match="not unit names: '-H.service'"):
        node.systemctl("stop", ["ollama.service", "-H.service"])
    with pytest.raises(ValueError, match="not unit names: 'a b.service'"):
        node.states(["a b.service"])
    assert systemctl_calls == []
