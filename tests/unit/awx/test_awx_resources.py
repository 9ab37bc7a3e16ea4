"""awx/resources.yml against what it is made from: the argument specs, the playbooks and the inventories.

The file is generated (tools/awx/gen_resources.py); these tests check it from the other side, each
survey question against its spec option, so that a change to a spec that the file does not follow fails
here with the question to change. awxkit's own check of the format is tests/awx (make awx-check).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
RESOURCES = ROOT / "awx" / "resources.yml"
PLAYBOOK_SPECS = ROOT / "awx" / "playbook_argument_specs.yml"
BOOT = ("roles/boot/meta/argument_specs.yml", "main")
PLAYBOOK = "awx/playbook_argument_specs.yml"
# template -> (playbook, [(spec file, entry point), ...]): what each playbook runs, its own spec first
SPECS = {
    "dgxspark preflight": ("playbooks/preflight.yml", [BOOT]),
    "dgxspark boot": ("playbooks/boot.yml", [BOOT]),
    "dgxspark stop": ("playbooks/stop.yml", [(PLAYBOOK, "stop")]),
    "dgxspark bench": ("playbooks/bench.yml", [(PLAYBOOK, "bench")]),
    "dgxspark compare": ("playbooks/compare.yml", [(PLAYBOOK, "compare")]),
    "dgxspark releases": ("playbooks/releases.yml", [(PLAYBOOK, "releases")]),
    # rollback.yml imports boot.yml
    "dgxspark rollback": ("playbooks/rollback.yml", [(PLAYBOOK, "rollback"), BOOT]),
    "dgxspark images": ("playbooks/images.yml", [(PLAYBOOK, "images")]),
    "dgxspark weights": ("playbooks/weights.yml", [(PLAYBOOK, "weights")]),
    # recover.yml imports boot.yml
    "dgxspark recover": ("playbooks/recover.yml", [(PLAYBOOK, "recover"), BOOT]),
    "dgxspark status": ("playbooks/status.yml", [(PLAYBOOK, "status")]),
    # window.yml imports boot.yml
    "dgxspark window": ("playbooks/window.yml", [(PLAYBOOK, "window"), BOOT]),
    # promote.yml imports boot.yml, bench.yml and rollback.yml
    "dgxspark promote": ("playbooks/promote.yml", [(PLAYBOOK, "promote"), (PLAYBOOK, "bench"), BOOT]),
}
# What rollback.yml sets for the boot it imports (set_fact). Extra variables, a survey's answers among them,
# take precedence over set_fact: a question for one of these would replace the release's own value.
ROLLBACK_SETS = {"boot_profile_content", "boot_release", "boot_replace", "boot_shape"}
# spec type -> the question types that can carry it
QUESTION_TYPES = {
    "bool": {"multiplechoice"},
    "int": {"integer"},
    "float": {"float"},
    "str": {"text", "textarea", "password", "multiplechoice"},
    "path": {"text", "textarea"},
    "list": {"text", "multiselect"},
}


def _resources() -> dict[str, Any]:
    return yaml.safe_load(RESOURCES.read_text())


def _options(spec_file: str, entry: str) -> dict[str, dict[str, Any]]:
    return yaml.safe_load((ROOT / spec_file).read_text())["argument_specs"][entry]["options"]


def _askable(option: dict[str, Any]) -> bool:
    """An option has a question when it has a literal default, or is required without one, and a value a form
    can hold."""
    default = option.get("default")
    templated = isinstance(default, str) and "{{" in default
    dict_valued = option.get("type") == "dict" or option.get("elements") == "dict"
    required = bool(option.get("required")) and "default" not in option
    return ("default" in option or required) and not templated and not dict_valued


def _answer(question: dict[str, Any], option: dict[str, Any]) -> Any:
    """The value the playbook sees when the question's default is taken, as the spec types it."""
    if "default" not in question:
        return [] if option.get("type") == "list" else ""
    default = question["default"]
    kind = option.get("type", "str")
    if kind == "bool":
        return {"true": True, "false": False}[default]
    if kind == "list":
        items = default.splitlines() if question["type"] == "multiselect" else default.split(",")
        return [int(i) if option.get("elements") == "int" else i for i in items]
    return default


# the templates of every inventory; a fleet cluster's own ("dgxspark boot (fleet sim3)") are test_awx_fleet.py's
TEMPLATES = {t["name"]: t for t in _resources()["job_templates"] if not t["name"].endswith(")")}


def test_the_file_is_the_generators_output() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools/awx/gen_resources.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _set_facts(playbook: str) -> set[str]:
    """The names a playbook's tasks give ansible.builtin.set_fact (blocks included), and those of the playbooks
    it imports."""
    text = (ROOT / playbook).read_text()
    names = set()
    for imported in re.findall(r"^- (?:name: .*\n  )?import_playbook: (\S+)$", text, re.M):
        names |= _set_facts(str(Path(playbook).parent / imported))
    for match in re.finditer(r"^( *)(?:- )?(?:ansible\.builtin\.)?set_fact:\n((?:\1 {2,}\S.*\n)+)", text, re.M):
        names.update(re.findall(r"^ *(\w+):", match[2], re.M))
    return names - {"cacheable"}


def _template_options(template: str) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The options of the template's specs (the first one that names an option gives it), less what the
    playbook sets; and where each option comes from."""
    playbook, specs = SPECS[template]
    options: dict[str, dict[str, Any]] = {}
    source: dict[str, str] = {}
    for spec_file, entry in specs:
        for name, option in _options(spec_file, entry).items():
            if name not in options:
                options[name], source[name] = option, f"{spec_file} {entry}"
    for name in _set_facts(playbook):
        options.pop(name, None)
    return options, source


def test_every_template_has_its_playbook_and_spec() -> None:
    assert set(TEMPLATES) == set(SPECS)
    for name, (playbook, _specs) in SPECS.items():
        assert TEMPLATES[name]["playbook"] == playbook
        assert (ROOT / playbook).is_file(), playbook


def test_rollback_asks_nothing_it_sets() -> None:
    assert _set_facts("playbooks/rollback.yml") == ROLLBACK_SETS


def test_promote_asks_nothing_it_or_its_rollback_sets() -> None:
    """promote.yml boots the candidate with set_fact (boot_candidate, boot_replace, the profile) and may roll back
    (rollback.yml's): a survey answer for any of them would replace it."""
    sets = _set_facts("playbooks/promote.yml")
    assert {"boot_candidate", "boot_replace", "boot_profile", "dgxspark_profile"} | ROLLBACK_SETS <= sets
    [template] = [t for t in _resources()["job_templates"] if t["name"] == "dgxspark promote"]
    asked = {question["variable"] for question in template["related"]["survey_spec"]["spec"]}
    assert not asked & sets, asked & sets
    assert "dgxspark_candidate" in asked
    questions = {q["variable"] for q in TEMPLATES["dgxspark rollback"]["related"]["survey_spec"]["spec"]}
    assert "dgxspark_release" in questions
    assert not questions & ROLLBACK_SETS, f"the rollback survey asks for {sorted(questions & ROLLBACK_SETS)}"


@pytest.mark.parametrize("template", sorted(SPECS))
def test_survey_equals_spec(template: str) -> None:
    options, source = _template_options(template)
    questions = {q["variable"]: q for q in TEMPLATES[template]["related"]["survey_spec"]["spec"]}
    expected = [name for name, option in options.items() if _askable(option)]
    assert list(questions) == expected, (
        f"{template}: questions {list(questions)} but {SPECS[template][1]} give {expected} in this order"
    )
    problems = []
    for name, question in questions.items():
        option = options[name]
        kind = option.get("type", "str")
        where = f"{template}: question {name} ({source[name]})"
        if question["type"] not in QUESTION_TYPES[kind]:
            problems.append(f"{where}: type {question['type']}, spec type {kind}")
        if (question["type"] == "password") != bool(option.get("no_log")):
            problems.append(f"{where}: password question and no_log differ")
        if "default" not in option:  # a required option: a required question, nothing filled in
            if not option.get("required") or not question["required"] or "default" in question:
                problems.append(f"{where}: a required option without a default must be a required empty question")
        elif _answer(question, option) != option["default"]:
            problems.append(f"{where}: default {question.get('default')!r}, spec default {option['default']!r}")
        elif question["required"]:
            # AWX's launch endpoint (API, CLI) and a schedule's save refuse a required question left unanswered,
            # default or not: a question with a default, or with none to give, is never required
            problems.append(f"{where}: required with default {question.get('default')!r}")
        spec_choices = ["true", "false"] if kind == "bool" else [str(c) for c in option.get("choices", [])]
        if question.get("choices", []) != spec_choices:
            problems.append(f"{where}: choices {question.get('choices')}, spec choices {spec_choices}")
        description = option["description"]
        description = description if isinstance(description, str) else " ".join(description)
        if not question["question_description"].startswith(description):
            problems.append(f"{where}: description differs from the spec's")
    assert not problems, "\n".join(problems)


# ------------------------------------------------------------- playbooks without a role spec
def _defaults_in(text: str, variable: str) -> list[str]:
    """Every `variable | default(EXPR)` in a playbook, EXPR as written (parentheses balanced)."""
    found = []
    for match in re.finditer(rf"\b{variable}\s*\|\s*default\(", text):
        depth, start = 1, match.end()
        for index in range(start, len(text)):
            depth += {"(": 1, ")": -1}.get(text[index], 0)
            if depth == 0:
                found.append(" ".join(text[start:index].split()))
                break
    return found


def _literal(expression: str) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", expression)))
    except (ValueError, SyntaxError):
        return False, None


@pytest.mark.parametrize(
    ("entry", "playbook", "prefixes"),
    [
        ("bench", "playbooks/bench.yml", ("dgxspark_bench_", "dgxspark_cluster_groups")),
        ("compare", "playbooks/compare.yml", ("dgxspark_bench_dir", "dgxspark_compare_", "dgxspark_cluster_groups")),
        ("stop", "playbooks/stop.yml", ("stop_",)),
        # the operator's variables (its own facts and play variables are named status_ too)
        (
            "status",
            "playbooks/status.yml",
            (
                "status_logs",
                "status_smoke",
                "status_format",
                "status_floor_margin",
                "dgxspark_bench_dir",
                "dgxspark_cluster_groups",
                "boot_releases_dir",
                "boot_rank_records",
            ),
        ),
        (
            "releases",
            "playbooks/releases.yml",
            ("dgxspark_release", "boot_releases_dir", "dgxspark_cluster_groups", "releases_history"),
        ),
        # its own variables; what the boot it imports reads is the boot role's spec
        ("rollback", "playbooks/rollback.yml", ("dgxspark_release", "boot_releases_dir")),
        (
            "images",
            "playbooks/images.yml",
            ("dgxspark_release", "images_", "dgxspark_cluster_groups", "boot_releases_dir"),
        ),
        # dgxspark_release is what it sets for the rollback it may import, not a variable it reads
        ("promote", "playbooks/promote.yml", ("dgxspark_candidate", "dgxspark_promote_", "boot_releases_dir")),
        # the operator's variables (its own facts and play variables are named window_ too)
        (
            "window",
            "playbooks/window.yml",
            tuple(
                f"window_{name}"
                for name in (
                    "image",
                    "command",
                    "name",
                    "hosts",
                    "env",
                    "volumes",
                    "gpus",
                    "network_mode",
                    "timeout_s",
                    "progress_s",
                )
            )
            + ("dgxspark_cluster_groups", "boot_releases_dir"),
        ),
    ],
)
def test_playbook_spec_equals_playbook(entry: str, playbook: str, prefixes: tuple[str, ...]) -> None:
    """awx/playbook_argument_specs.yml names every variable the playbook reads, with the playbook's defaults."""
    text = (ROOT / playbook).read_text()
    plays = yaml.safe_load(text)
    registered = set(re.findall(r"^\s*register:\s*(\w+)", text, re.M))
    play_vars = {k: v for play in plays for k, v in (play.get("vars") or {}).items()}
    # a word read as a variable: not a task's registered result, and not only a key of a module's arguments
    # (node_phase's stop_ranks), unless the play defines it
    words = re.findall(r"\b([a-z_]+)\b(?!:)", text) + list(play_vars)
    if "lookup('dgxspark.cluster.cluster_groups'" in text:  # the lookup reads dgxspark_cluster_groups
        words.append("dgxspark_cluster_groups")
    read = {name for name in words if name.startswith(prefixes) and name not in registered}
    options = _options("awx/playbook_argument_specs.yml", entry)
    assert set(options) == read, f"{playbook} reads {sorted(read)}; the spec has {sorted(options)}"
    problems = []
    for name, option in options.items():
        if name in play_vars:  # a play variable computed by a template is no literal default
            value = play_vars[name]
            defaults = [(not (isinstance(value, str) and "{{" in value), value)]
        else:
            defaults = [_literal(expression) for expression in _defaults_in(text, name)]
        literal = [value for is_literal, value in defaults if is_literal]
        if "default" in option:
            if not literal or any(value != option["default"] for value in literal):
                problems.append(f"{name}: spec default {option['default']!r}, {playbook} falls back to {literal}")
        elif literal:
            problems.append(f"{name}: {playbook} falls back to {literal}, the spec has no default")
    assert not problems, "\n".join(problems)
