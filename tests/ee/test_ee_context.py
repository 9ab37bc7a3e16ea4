"""The execution environment's build context (make ee-context) against what the EE must hold.

Run in .venv-builder (ansible-builder 3.2.0 and its bindep): make ee-check. Skipped when there is no
context. EE_CHECK_CONTEXT (.build/ee) names the context; EE_CHECK_VENV (.venv) the venv whose ansible-core,
the one the EE installs, replays the EE's ansible-galaxy and runs the syntax checks.

- The Containerfile starts from the local base image and nothing else: every FROM is that image or an
  earlier stage, and its name has no registry in it.
- Every pip install of the build takes the wheels of the context's wheels/ (make ee-image puts them there) and
  asks no index: the base stage's /etc/pip.conf, which the other stages inherit, removed at the end.
- ansible-core and ansible-runner are pinned, ansible-core to .venv's; the Python requirements are the lock
  requirements/constraints-ee-py313.txt.
- The galaxy stage's own commands, run here against the context's _build/ with no Galaxy server in reach,
  install dgxspark.cluster at galaxy.yml's version and the collections it depends on, each within the
  range its dependant declares, and nothing else. The job templates' playbooks (awx/resources.yml) find
  everything they name in that install alone.
- The builder stage's own introspection, run here on that install, gives Python requirements that the lock
  pins, every one, and bindep selects no system package on Debian trixie, the base image's system.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml

depends = pytest.importorskip("bindep.depends", reason="bindep is in .venv-builder (make ee-check)")
from packaging.requirements import Requirement  # noqa: E402 - after the importorskip
from packaging.specifiers import SpecifierSet  # noqa: E402
from packaging.utils import canonicalize_name  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CONTEXT = ROOT / os.environ.get("EE_CHECK_CONTEXT", ".build/ee")
VENV = ROOT / os.environ.get("EE_CHECK_VENV", ".venv")
BUILD = CONTEXT / "_build"
CONTAINERFILE = CONTEXT / "Containerfile"
DEFINITION = yaml.safe_load((ROOT / "execution-environment.yml").read_text())
GALAXY = yaml.safe_load((ROOT / "galaxy.yml").read_text())
EE_LOCK = ROOT / "requirements" / "constraints-ee-py313.txt"
DEV_LOCK = ROOT / "requirements" / "constraints-py313.txt"
# Where the image keeps what the galaxy stage installs (ansible-builder's constants), replaced here by a
# temporary folder.
IMAGE_ANSIBLE = "/usr/share/ansible"

pytestmark = pytest.mark.skipif(not CONTAINERFILE.is_file(), reason=f"no build context in {CONTEXT}: make ee-check")


def _pins(lock: Path) -> dict[str, str]:
    """name -> version of every `name==version` requirement of a lock (the dev lock's carry hashes on
    continuation lines: `name==version \\` then `--hash=sha256:...`)."""
    pins = {}
    for line in re.sub(r"\\\n", " ", lock.read_text()).splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split()[0].split("==")
            pins[canonicalize_name(name)] = version
    return pins


def _containerfile() -> tuple[dict[str, str], list[tuple[str, list[str]]]]:
    """The global ARGs (before the first FROM) and the stages: (stage name, its instructions)."""
    args: dict[str, str] = {}
    stages: list[tuple[str, list[str]]] = []
    for line in CONTAINERFILE.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("FROM "):
            stages.append((line, []))
        elif stages:
            stages[-1][1].append(line)
        else:
            match = re.fullmatch(r'ARG (\w+)="(.*)"', line)
            assert match, f"a global line that is no ARG: {line}"
            args[match[1]] = match[2]
    return args, stages


ARGS, STAGES = _containerfile()


def _stage(name: str) -> list[str]:
    (lines,) = [lines for line, lines in STAGES if line.endswith(f" AS {name}")]
    return lines


def test_the_base_image_is_local_and_the_only_image() -> None:
    base = DEFINITION["images"]["base_image"]["name"]
    assert ARGS["EE_BASE_IMAGE"] == base
    assert "EE_BUILDER_IMAGE" not in ARGS
    # a registry is named by a first component with a dot or a port, or localhost
    first = base.split("/")[0]
    assert "/" in base and "." not in first and ":" not in first and first != "localhost", base
    assert base.startswith("dgxspark-ee/"), f"{base}: the local images are named dgxspark-ee/... (README)"
    seen: list[str] = []
    for line, lines in STAGES:
        match = re.fullmatch(r"FROM (\S+) AS (\w+)", line)
        assert match, line
        assert match[1] == "$EE_BASE_IMAGE" or match[1] in seen, f"{line}: neither the base image nor a stage"
        for copy in (entry for entry in lines if entry.startswith("COPY --from=")):
            assert copy.split()[1].removeprefix("--from=") in seen, f"{copy}: copies from outside the build"
        seen.append(match[2])
    assert seen == ["base", "galaxy", "builder", "final"]


def test_ansible_core_and_runner_are_pinned_ansible_core_to_what_we_develop_on() -> None:
    ee, dev = _pins(EE_LOCK), _pins(DEV_LOCK)
    assert ee["ansible-core"] == dev["ansible-core"], "the EE's ansible-core differs from .venv's"
    assert dev["ansible-core"].startswith("2.21."), dev["ansible-core"]
    assert ARGS["ANSIBLE_INSTALL_REFS"].split() == [
        f"ansible-core=={ee['ansible-core']}",
        f"ansible-runner=={ee['ansible-runner']}",
    ]
    assert "RUN $PYCMD -m pip install --no-cache-dir $ANSIBLE_INSTALL_REFS" in _stage("base")


def test_the_python_requirements_are_the_lock() -> None:
    assert DEFINITION["dependencies"]["python"] == str(EE_LOCK.relative_to(ROOT))
    lines = [line for line in (BUILD / "requirements.txt").read_text().splitlines() if line and line[0] != "#"]
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+==[A-Za-z0-9.+!-]+", line) for line in lines), lines
    ee, dev = _pins(EE_LOCK), _pins(DEV_LOCK)
    assert {canonicalize_name(line.split("==")[0]): line.split("==")[1] for line in lines} == ee
    # Debian's pip, setuptools and wheel are the base image's; pip cannot uninstall them
    assert not {"pip", "setuptools", "wheel"} & set(ee)
    assert {name: version for name, version in ee.items() if dev.get(name, version) != version} == {}, (
        "a package the EE shares with .venv at another version: make lock-ee"
    )


def test_every_pip_install_takes_the_wheels_from_the_context_and_asks_no_index() -> None:
    """make ee-image downloads the wheels on the host (PyPI is not reachable from inside a build here) into the
    context's wheels/; the base stage copies them and writes a pip.conf that every later stage inherits (each is
    FROM base), before its first pip install; the final stage removes it after its last one."""
    base, final = _stage("base"), _stage("final")
    pip_conf = ("[global]", "no-index = true", "find-links = /output/wheelhouse", "root-user-action = ignore")
    settings = "\\n".join(pip_conf)
    conf = f"RUN printf '{settings}\\n' > /etc/pip.conf"
    installs = [i for i, line in enumerate(base) if " pip install " in line]
    assert installs and base.index("COPY wheels/ /output/wheelhouse/") < base.index(conf) < installs[0], base
    assert [line for line, _lines in STAGES if line.startswith("FROM base ")] == [
        "FROM base AS galaxy",
        "FROM base AS builder",
        "FROM base AS final",
    ]
    last = max(i for i, line in enumerate(final) if " pip install " in line)
    assert final.index("RUN rm /etc/pip.conf") > last, final
    every = CONTAINERFILE.read_text()
    assert not re.search(r"--index-url|--extra-index-url|PIP_INDEX|https?://", every), "an index in the Containerfile"


# ---------------------------------------------------------------- the galaxy stage, replayed
def _replay_env(tmp: Path, install: Path) -> dict[str, str]:
    (tmp / "ansible.cfg").write_text("[defaults]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(
        PATH=f"{VENV / 'bin'}:{env['PATH']}",
        HOME=str(tmp),
        ANSIBLE_CONFIG=str(tmp / "ansible.cfg"),
        # only what the stage installed: not the checkout's link, not the `ansible` package in .venv
        ANSIBLE_COLLECTIONS_PATH=str(install / "collections"),
        ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
        ANSIBLE_ROLES_PATH=str(install / "roles"),
        # a server that is not there: any attempt to reach one fails
        ANSIBLE_GALAXY_SERVER="http://127.0.0.1:9/",
        ANSIBLE_NOCOLOR="1",
    )
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run the galaxy stage's RUN lines in _build/, its ARGs in the environment, IMAGE_ANSIBLE replaced by
    a temporary folder; then every collection installed, by name: its MANIFEST's collection_info."""
    tmp = tmp_path_factory.mktemp("ee")
    install = tmp / "share-ansible"
    env = _replay_env(tmp, install) | {name: ARGS[name] for name in ARGS}
    runs = [line.removeprefix("RUN ") for line in _stage("galaxy") if line.startswith("RUN ansible-galaxy ")]
    runs += [line.removeprefix("RUN ") for line in _stage("galaxy") if " ansible-galaxy collection install " in line]
    assert len(runs) == 2, runs
    assert (
        "$ANSIBLE_GALAXY_CLI_COLLECTION_OPTS" in runs[1] and "--offline" in ARGS["ANSIBLE_GALAXY_CLI_COLLECTION_OPTS"]
    )
    log = []
    for command in runs:
        result = subprocess.run(
            ["bash", "-euc", command.replace(IMAGE_ANSIBLE, str(install))],
            cwd=BUILD,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, f"{command}\n{result.stdout}{result.stderr}"
        log.append(result.stdout + result.stderr)
    collections = {}
    for manifest in sorted((install / "collections/ansible_collections").glob("*/*/MANIFEST.json")):
        info = json.loads(manifest.read_text())["collection_info"]
        collections[f"{info['namespace']}.{info['name']}"] = info
    return {"tmp": tmp, "install": install, "collections": collections, "log": "".join(log)}


def test_the_collections_install_offline_and_are_what_galaxy_yml_declares(installed: dict[str, Any]) -> None:
    collections = dict(installed["collections"])
    own = collections.pop(f"{GALAXY['namespace']}.{GALAXY['name']}")
    assert own["version"] == GALAXY["version"]
    assert own["dependencies"] == GALAXY["dependencies"]
    # every dependency of what is installed is installed, within the declared range; nothing else is
    needed = set()
    for info in [own, *collections.values()]:
        for name, declared in (info.get("dependencies") or {}).items():
            assert name in collections, f"{info['name']} needs {name}, which the EE lacks"
            needed.add(name)
            version = collections[name]["version"]
            assert version in SpecifierSet(declared.replace("*", "")), f"{name} {version} is outside {declared}"
    assert set(collections) == needed, f"installed but needed by nothing: {sorted(set(collections) - needed)}"
    assert "Skipping install, no requirements found" in installed["log"]  # no role is asked for


def test_the_templates_playbooks_find_everything_they_name_in_the_install(installed: dict[str, Any]) -> None:
    resources = yaml.safe_load((ROOT / "awx/resources.yml").read_text())
    playbooks = sorted({template["playbook"] for template in resources["job_templates"]})
    env = _replay_env(installed["tmp"], installed["install"])
    result = subprocess.run(
        [str(VENV / "bin/ansible-playbook"), "--syntax-check", "-i", "inventories/spark3/hosts.yml", *playbooks],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# ---------------------------------------------------------------- the builder stage's introspection
@pytest.fixture(scope="module")
def introspected(installed: dict[str, Any]) -> dict[str, str]:
    """The builder stage's introspect line, run on the replayed install: the pip and bindep files it writes."""
    (line,) = [line for line in _stage("builder") if "introspect.py introspect" in line]
    out = installed["tmp"] / "src"
    out.mkdir()
    argv = (
        line.removeprefix("RUN ").replace("$PYCMD", sys.executable).replace("/output/scripts", str(BUILD / "scripts"))
    )
    argv = argv.replace("/tmp/src", str(out)).split()
    # the folder the image reads is the default, IMAGE_ANSIBLE/collections
    argv.insert(argv.index("introspect") + 1, str(installed["install"] / "collections"))
    # WORKDIR /build holds requirements.txt (COPY _build/requirements.txt requirements.txt)
    result = subprocess.run(argv, cwd=BUILD, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return {
        name: (out / name).read_text() if (out / name).is_file() else "" for name in ("requirements.txt", "bindep.txt")
    }


def test_every_python_requirement_of_the_image_is_pinned(introspected: dict[str, str]) -> None:
    ee = _pins(EE_LOCK)
    unpinned = []
    for line in introspected["requirements.txt"].splitlines():
        requirement = line.split("#")[0].strip()
        if requirement and canonicalize_name(Requirement(requirement).name) not in ee:
            unpinned.append(line)
    assert not unpinned, f"requirements the lock does not pin (add them to requirements/ee.in): {unpinned}"
    # community.docker's own, which the lock pins
    assert "docker  # from collection community.docker" in introspected["requirements.txt"]


def test_bindep_selects_no_system_package_on_debian(introspected: dict[str, str]) -> None:
    rules = depends.Depends(introspected["bindep.txt"])
    with (
        mock.patch.object(depends.distro, "id", return_value="debian"),
        mock.patch.object(depends.distro, "codename", return_value="trixie"),
        mock.patch.object(depends.distro, "version", return_value="13"),
    ):
        platform = rules.platform_profiles()
    assert "platform:dpkg" in platform
    # assemble's `bindep -l newline` (the default profile) and `bindep -b compile`
    for profile in ("default", "compile"):
        active = rules.active_rules([profile, *platform])
        assert not active, f"bindep selects {active} on Debian ({profile}); the base image has no package lists"
