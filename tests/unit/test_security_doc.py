# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/security.md stays true: the README links it, and every figure and name it gives is the code's."""

from __future__ import annotations

import importlib.util
import re
from types import ModuleType

import pytest
import yaml

from ansible_collections.dgxspark.cluster.plugins.action import memguard_plan
from ansible_collections.dgxspark.cluster.plugins.module_utils._secret_names import is_secret_name
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.checks import CHECKS
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.docker_args import PRIVILEGE_CHECKS
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.policy import (
    CAPABILITIES_ALLOWED,
    DEFAULT_SECRETS_DIR,
    KERNEL_WORD_VALUES,
    SYSTEM_PATHS,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.schema import (
    DEFAULT_API_PORT,
    DEFAULT_MASTER_PORT,
    WAIVABLE_CHECKS,
)
from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT

DOC = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
TEXT = " ".join(DOC.split())  # the figures as one line, whatever the wrapping
GUARD_DEFAULTS = yaml.safe_load((ROOT / "roles" / "memguard" / "defaults" / "main.yml").read_text(encoding="utf-8"))
BOOT_DEFAULTS = yaml.safe_load((ROOT / "roles" / "boot" / "defaults" / "main.yml").read_text(encoding="utf-8"))


def daemon() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "dgxspark_memguard_doc", ROOT / "roles" / "memguard" / "files" / "dgxspark_memguard.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_links_it() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "[docs/security.md](docs/security.md)" in readme


def test_its_ports_and_paths_are_the_defaults() -> None:
    assert GUARD_DEFAULTS["memguard_peer_port"] == 7391 and "7391" in TEXT
    assert GUARD_DEFAULTS["memguard_peer_network"] == "management"
    assert "`memguard_peer_network: management`, the default" in TEXT
    assert GUARD_DEFAULTS["memguard_peer_key_file"].endswith("/.dgxspark-memguard.key")
    assert "`<inventory>/.dgxspark-memguard.key`" in TEXT
    assert f"`container.api_port` ({DEFAULT_API_PORT})" in TEXT
    assert f"`container.master_port` ({DEFAULT_MASTER_PORT})" in TEXT
    assert BOOT_DEFAULTS["boot_rank_records"] and "`boot_rank_records`" in TEXT
    assert "/run/dgxspark-memguard/control.sock" in TEXT


def test_its_guard_figures_are_the_daemons() -> None:
    guard = daemon()
    assert guard.PEER_MESSAGE_MAX == 4096 and "at most 4 KiB" in TEXT
    assert guard.PEER_DEADLINE_S == 2.0 and "4 KiB and 2 s" in TEXT
    assert guard.MAX_CONNECTIONS == 16 and "the control socket at most 16 at once" in TEXT
    assert guard.PEER_SLOTS == 8 and "At most 8 connections at once from each planned peer's address" in TEXT
    assert (guard.PEER_HOST_MAX, guard.PEER_REASON_MAX) == (
        255,
        1000,
    ) and "at most 255 characters, the reason 1000" in TEXT
    assert guard.PEER_TIME_MAX == 10.0**10 and "between 0 and 10^10 s" in TEXT
    assert guard.STOP_ALL_DEADLINE_S == 30.0 and "30 s have passed" in TEXT
    assert (guard.REJECTIONS_BURST, guard.REJECTIONS_WINDOW_S) == (5, 60.0) and "at most 5 a minute" in TEXT
    assert guard.PEER_MAX_SKEW_S == 120.0 and "within 120 s" in TEXT and "more than 120 s" in TEXT
    assert (memguard_plan.KEY_LENGTH, memguard_plan.KEY_CHARS.isalnum()) == (40, True)
    assert "40 letters and digits" in TEXT


@pytest.mark.parametrize(
    "word", ["TOKEN", "KEY", "AUTH", "SECRET", "PASSW", "PASSPHRASE", "PRIVATE", "CREDENTIAL", "API_KEY", "ACCESS_KEY"]
)
def test_the_names_it_says_are_redacted_are(word: str) -> None:
    assert f"`{word}`" in TEXT or f"`{word} (" in TEXT or f"`{word}` (" in TEXT
    for name in (f"{word}_Y", f"X_{word}_Y", f"X_{word}", f"X{word}Y"):  # "anywhere in the name", as it says
        assert is_secret_name(name), name


@pytest.mark.parametrize(
    "name", ["MAX_TOKENS", "TOKENIZERS_PARALLELISM", "SIM_ENGINE_KV_BYTES_PER_TOKEN", "NCCL_IB_PKEY", "GIT_AUTHOR_NAME"]
)
def test_the_names_it_says_are_not_secrets_are_not(name: str) -> None:
    assert f"`{name}`" in TEXT
    assert not is_secret_name(name)


def test_it_says_what_is_redacted_and_where() -> None:
    from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.secrets import redact_text

    for spelling in ("`-e NAME=v`", "`-eNAME=v`", "`--env NAME=v`", "`--env=NAME=v`", "`--log-opt=splunk-token=...`"):
        assert spelling in TEXT, spelling
        assert redact_text(spelling.strip("`").replace("NAME", "HF_AUTH").replace("...", "x1")).endswith("chars>"), (
            spelling
        )
    assert "`https://user:<redacted, 8 chars>@proxy`" in TEXT
    assert redact_text("https://user:password@proxy") == "https://user:<redacted, 8 chars>@proxy"
    for place in ("`plan.yml`", "`rank_container`", "log tail", "`dgxspark.cluster.redact`", "`MONKEY_COUNT`"):
        assert place in TEXT, place
    ee_lock = (ROOT / "requirements" / "constraints-ee-py313.txt").read_text(encoding="utf-8")
    pins = len(re.findall(r"^[A-Za-z0-9][A-Za-z0-9._-]*==", ee_lock, re.M))
    assert "## Supply chain" in DOC and "`dgxspark_image_by_tag`" in TEXT and f"its {pins} packages" in TEXT


def test_the_checks_it_names_exist() -> None:
    named = set(re.findall(r"`([a-z]+(?:-[a-z]+)+)`", DOC))
    checks = {"image-present", "image-id", "fabric-not-management", "secret-files"}
    assert checks <= named and checks <= set(CHECKS)
    # a name added to the page is a preflight check, a check a profile waives by name (the allow-lists), or listed here
    assert named - checks <= {"stop-all"} | set(WAIVABLE_CHECKS), named - checks - set(WAIVABLE_CHECKS)
    assert "weights_path" in TEXT and "weights-read-only" in PRIVILEGE_CHECKS


def test_its_allow_lists_are_the_code_s() -> None:
    for check in PRIVILEGE_CHECKS + ("kernel-words",):
        assert f"`{check}`" in TEXT, check
    for path in SYSTEM_PATHS:
        assert f"`{path}`" in TEXT, path
    for capability in CAPABILITIES_ALLOWED:
        assert f"`{capability}`" in TEXT, capability
    for word in KERNEL_WORD_VALUES:
        assert f"`{word}=" in TEXT, word
    assert f"(default `{DEFAULT_SECRETS_DIR}`" in TEXT
    assert "**What a waiver costs.**" in TEXT
