# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The profile's own values held to allow-lists (issue 26): secrets' files in the one secrets directory, kernel words
the collection knows, no option where a value belongs, no helper the node runs on. Each hostile value is refused at
its JSON path; the legitimate ones (the shipped profiles, seed 000's) pass.

The rank's ``docker run`` allow-lists have their own table in test__privilege_policy.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Collector, ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.kernel import grub_dropin, required
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.plan import Host, build_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.policy import (
    KERNEL_WORDS_KNOWN,
    known_kernel_word,
    secrets_dir_problem,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import (
    _check_remote_code_outside_serve_args,
    validate_profile,
)
from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT, SEED000, SPARK3, edited

HOSTS = [Host(f"spark-{i}", i, f"198.51.100.{10 + i}", head=i == 0) for i in range(3)]


def refused(edits: dict[str, Any], base: Any = SPARK3) -> list[Any]:
    with pytest.raises(ProfileError) as caught:
        validate_profile(edited(json.loads(base.read_text()), edits), "profile.json")
    return list({p.render(): p for p in caught.value.problems}.values())


def passes(edits: dict[str, Any], base: Any = SPARK3) -> Any:
    return validate_profile(edited(json.loads(base.read_text()), edits), "profile.json")


# ------------------------------------------------------------------------------------------- secrets' files
@pytest.mark.parametrize(
    "where,path",
    [
        ("container/secrets/hf_token", "/etc/ssh/ssh_host_ed25519_key"),  # issue 26
        ("container/secrets/hf_token", "/etc/dgxspark-memguard/config.json"),  # issue 26: the guard's key
        ("container/secrets/hf_token", "/root/.ssh/authorized_keys"),
        ("container/secrets/hf_token", "/etc/sudoers.d/dgxspark"),
        ("container/secrets/hf_token", "/etc/dgxspark/secrets/sub/hf_token"),  # below the directory, not in it
        ("container/secrets/hf_token", "/etc/dgxspark/secrets"),  # the directory itself
        ("container/api/api_key_file", "/etc/shadow"),
        ("container/api/tls", {"certfile": "/etc/ssl/private/x.pem", "keyfile": "/etc/dgxspark/secrets/k"}),
        (
            "container/api/tls",
            {
                "certfile": "/etc/dgxspark/secrets/c",
                "keyfile": "/etc/dgxspark/secrets/k",
                "ca_file": "/var/lib/dgxspark/ca.crt",
            },
        ),
    ],
)
def test_a_secret_outside_the_secrets_directory_is_refused(where: str, path: Any) -> None:
    problems = refused({where: path})
    assert [p.message for p in problems if "docker_run_args" not in p.where] and all(
        "a secret's file outside the secrets directory (host.secrets_dir /etc/dgxspark/secrets)" in p.message
        for p in problems
    ), [p.render() for p in problems]
    assert all(p.expected.startswith("a file directly in /etc/dgxspark/secrets") for p in problems)


def test_secrets_in_the_secrets_directory_pass_and_the_plan_names_the_directory() -> None:
    profile = passes(
        {
            "container/secrets/hf_token": "/etc/dgxspark/secrets/hf_token",
            "container/api/api_key_file": "/etc/dgxspark/secrets/vllm_api_key",
        }
    )
    plan = build_plan(profile, "tp3-triangle", HOSTS)
    assert plan["secrets_dir"] == "/etc/dgxspark/secrets"
    assert plan["secrets"]["hf_token"] == "/etc/dgxspark/secrets/hf_token"
    moved = passes(
        {"host/secrets_dir": "/var/lib/dgxspark/keys", "container/secrets/hf_token": "/var/lib/dgxspark/keys/t"}
    )
    assert build_plan(moved, "tp3-triangle", HOSTS)["secrets_dir"] == "/var/lib/dgxspark/keys"
    # a secret at the old default is refused once the directory moves
    (problem,) = refused(
        {"host/secrets_dir": "/var/lib/dgxspark/keys", "container/secrets/t": "/etc/dgxspark/secrets/t"}
    )
    assert problem.where == "$.container.secrets.t"


@pytest.mark.parametrize(
    "directory,message",
    [
        ("/etc/ssh", "a directory of the collection's own"),
        ("/etc", "a directory of the collection's own"),
        ("/etc/dgxspark", "a directory of the collection's own"),  # the tree itself (fabric.conf lives there)
        ("/etc/dgxspark-memguard", "a directory of the collection's own"),
        ("/root/dgxspark", "a directory of the collection's own"),
        ("/home/nvidia/secrets", "a directory of the collection's own"),
        ("/lib/systemd/system", "a directory of the collection's own"),
        ("/var", "clear of the system's"),  # it holds /var/run
        ("/", "invalid value"),
        ("/etc/dgxspark/secrets/", "invalid value"),  # the schema's pattern: no trailing slash
        ("/etc/dgxspark/../ssh", "invalid value"),
    ],
)
def test_a_secrets_directory_outside_the_collection_s_own_is_refused(directory: str, message: str) -> None:
    problems = refused({"host/secrets_dir": directory})
    assert any(p.where == "$.host.secrets_dir" and message in (p.message + p.expected) for p in problems), [
        p.render() for p in problems
    ]


def test_the_secrets_directory_rule() -> None:
    assert secrets_dir_problem("/etc/dgxspark/secrets") == ""
    assert secrets_dir_problem("/opt/dgxspark/s") == ""
    assert secrets_dir_problem("/srv/keys") == ""  # clear of every system path
    assert secrets_dir_problem("/var/lib/dgxspark2/x") == ""
    assert secrets_dir_problem("/etc/dgxspark//secrets").startswith("write it plainly")


def test_secrets_yml_takes_its_one_directory_from_the_plan() -> None:
    text = (ROOT / "playbooks" / "secrets.yml").read_text()
    assert "secret_files_given(dgxspark_secret_values, secrets_plan.plan.secrets_dir)" in text
    assert text.count("dest:") == 1 and 'dest: "{{ item.value }}"' in text  # each file from secret_files_given


# ------------------------------------------------------------------------------------------- kernel words
HOSTILE_WORDS = [
    "init=/bin/sh",  # issue 26
    "apparmor=0",  # issue 26: undoes what apparmor-unconfined guards
    "mitigations=off",  # issue 26
    "module.sig_enforce=0",  # issue 26
    "selinux=0",
    "security=none",
    "systemd.unit=rescue.target",
    "rd.break",
    "kho=on",  # a known key with a value it does not take
    "nokaslr",
    "lockdown=none",
    "hugepages=-1",
    "transparent_hugepage=sometimes",
    "console=ttyS0,115200n8",
]


@pytest.mark.parametrize("word", HOSTILE_WORDS)
def test_a_kernel_word_the_collection_does_not_know_is_refused_unless_waived(word: str) -> None:
    edits = {"host/kernel/cmdline_required": ["kho=off", word]}
    (problem,) = refused(edits)
    assert problem.where == "$.host.kernel.cmdline_required[1]" and problem.found == word
    assert problem.expected == "one of the known words: " + KERNEL_WORDS_KNOWN
    assert '"kernel-words": "<why>"' in problem.hint
    profile = passes({**edits, "waivers": {"kernel-words": "a test of the waiver: the site needs it"}})
    assert any(w.message.startswith("waived kernel-words (a test of the waiver") for w in profile.warnings)


@pytest.mark.parametrize(
    "word", ["kho=off", "transparent_hugepage=madvise", "hugepagesz=2M", "default_hugepagesz=1G", "hugepages=64"]
)
def test_the_known_kernel_words_pass(word: str) -> None:
    assert known_kernel_word(word)
    passes({"host/kernel/cmdline_required": ["kho=off", word]})


@pytest.mark.parametrize("word", HOSTILE_WORDS[:4])
def test_the_kernel_role_and_its_renderer_refuse_the_word_too(word: str) -> None:
    profile = json.loads(SPARK3.read_text())
    with pytest.raises(ProfileError, match="kernel command-line words the collection does not know"):
        required({"profile": profile}, {"cmdline_required": ["kho=off", word]}, True, False)
    with pytest.raises(ValueError, match="kernel command-line words the collection does not know"):
        grub_dropin(["kho=off", word])
    # under the profile's waiver the role passes it on, and the renderer writes it
    profile["waivers"] = {"kernel-words": "a test of the waiver: the site needs it"}
    wanted = required({"profile": profile}, {"cmdline_required": ["kho=off", word]}, True, False)
    assert wanted["cmdline_waived"] == [word]
    assert word in grub_dropin(["kho=off", word], wanted["cmdline_waived"])


# ------------------------------------------------------------------------------------------- no option for a value
@pytest.mark.parametrize(
    "edits,where",
    [
        ({"container/model_path": "--trust-remote-code"}, "$.container.model_path"),  # issue 26
        ({"container/model_path": "-tp"}, "$.container.model_path"),
        ({"container/model_path": "--api-key=sk-x"}, "$.container.model_path"),
        ({"model": "--trust-remote-code"}, "$.model"),  # the served name (--served-model-name <model>)
        ({"model": "-"}, "$.model"),
        ({"container/entrypoint": ["vllm", "serve", "--trust-remote-code"]}, "$.container.entrypoint[2]"),
        ({"container/entrypoint": ["sh", "-c", "vllm"]}, "$.container.entrypoint[1]"),
        ({"container/entrypoint": ["--privileged"]}, "$.container.entrypoint[0]"),
        ({"model_revision": "--trust-remote-code"}, "$.model_revision"),
    ],
)
def test_a_value_that_parses_as_an_option_is_refused(edits: dict[str, Any], where: str) -> None:
    problems = refused(edits)
    assert any(p.where == where for p in problems), [p.render() for p in problems]
    assert any(p.where == where and "not starting with -" in p.expected for p in problems)


@pytest.mark.parametrize(
    "edits",
    [
        {"container/model_path": "/models/DeepSeek-V4.1-Flash"},
        {"container/model_path": "deepseek-ai/DeepSeek-V4.1-Flash-1017"},
        {"model": "dsv41-flash"},
        {"container/entrypoint": ["vllm", "serve"]},
    ],
)
def test_values_that_are_values_pass(edits: dict[str, Any]) -> None:
    passes(edits)


def test_the_remote_code_warning_reads_the_entrypoint_and_the_model_argument() -> None:
    out = Collector()
    container = {
        "entrypoint": ["vllm", "serve", "--trust_remote_code"],
        "model_path": "--trust-remote",  # an abbreviation argparse completes
        "fork_flags": [],
    }
    _check_remote_code_outside_serve_args(container, out)
    assert [w.where for w in out.warnings] == ["$.container.entrypoint[2]", "$.container.model_path"]
    assert all("--trust-remote-code runs the Python code" in w.message for w in out.warnings)
    clean = Collector()
    _check_remote_code_outside_serve_args(
        {"entrypoint": ["vllm", "serve"], "model_path": "/m", "fork_flags": []}, clean
    )
    assert clean.items == []


# ------------------------------------------------------------------------------------------- helper services
@pytest.mark.parametrize(
    "unit",
    [
        "ssh.service",  # issue 26: pausing sshd cuts Ansible off
        "sshd.service",
        "docker.service",  # issue 26
        "containerd.service",
        "dgxspark-memguard.service",  # issue 26: the guard's own unit
        "systemd-journald.service",
        "systemd-resolved.service",
        "dbus.service",
        "NetworkManager.service",
        "docker.socket",
    ],
)
def test_a_helper_the_node_runs_on_is_refused(unit: str) -> None:
    (problem,) = refused({"host/helper_services": ["ollama.service", unit]})
    assert problem.where == "$.host.helper_services[1]" and problem.message.startswith(f"a boot never pauses {unit}: ")


def test_the_seed_profile_and_its_helpers_pass() -> None:
    passes({}, SEED000)
    passes({"host/helper_services": ["ollama.service", "comfyui.service", "sshguard.service"]})
