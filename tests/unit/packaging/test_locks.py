# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Python locks are hashed, and every venv the makefiles build installs in pip's hash-checking mode.

- every lock under requirements/ (constraints-*.txt) pins each package with ==, and each pin carries at least
  one --hash=sha256 (tools/ci/lock_hashes.py writes every file's); the EE's too (issue 26), which ansible-builder
  is given as name==version lines (tools/packaging/ee_context.py) while tools/packaging/ee_image.py checks every
  wheel of the build against its hashes (mk/packaging.mk says why);
- every `pip install` in the Makefile and mk/*.mk runs with --require-hashes and wheels only, and installs
  either pip's own hashed entry of a lock (--no-deps) or an .in under its hashed lock (-c); nothing else
  (no bare `pip install name==version`);
- every venv a recipe creates gets its pip and its packages from the same hashed lock, and every hashed lock
  is one that a recipe installs and a lock target regenerates.
Nothing here reaches the network: `make venv` and the others do (docs/security.md, "A supply chain
pinned by hash", which the last test holds to the locks).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT

REQUIREMENTS = ROOT / "requirements"
EE_LOCK = REQUIREMENTS / "constraints-ee-py313.txt"
LOCKS = sorted(REQUIREMENTS.glob("constraints-*.txt"))
VENV_LOCKS = [lock for lock in LOCKS if lock != EE_LOCK]  # the locks a venv recipe installs
HASHED_LOCKS = LOCKS
MAKEFILES = [ROOT / "Makefile", *sorted((ROOT / "mk").glob("*.mk"))] + (
    [ROOT / "sim" / "sim.mk"] if (ROOT / "sim" / "sim.mk").is_file() else []
)
PIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+")
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")


def entries(lock: Path) -> list[list[str]]:
    """Every requirement of a lock, its continuation lines joined: [name==version, option, ...]."""
    text = re.sub(r"\\\n", " ", lock.read_text(encoding="utf-8"))
    return [line.split() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def recipes(makefile: Path) -> dict[str, list[str]]:
    """target -> its recipe lines (continuations joined), for every rule with a recipe."""
    rules: dict[str, list[str]] = {}
    target = None
    text = re.sub(r"\\\n", " ", makefile.read_text(encoding="utf-8"))
    for line in text.splitlines():
        if line.startswith("\t") and target is not None:
            rules[target].append(line.strip())
        elif re.match(r"^[^\s#=]+:(?!=)", line):
            target = line.split(":", 1)[0]
            rules.setdefault(target, [])
        elif line.strip() and not line.startswith("\t"):
            target = None
    return {name: lines for name, lines in rules.items() if lines}


ALL_RECIPES = {f"{path.name}:{name}": lines for path in MAKEFILES for name, lines in recipes(path).items()}
PIP_INSTALLS = [
    (name, line)
    for name, lines in ALL_RECIPES.items()
    for line in lines
    if re.search(r"\bpip3?(\.exe)?\s+install\b|-m\s+pip\s+install\b", line)
]


def lock_hashes() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lock_hashes", ROOT / "tools" / "ci" / "lock_hashes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_there_are_locks_and_install_lines() -> None:
    assert len(VENV_LOCKS) >= 7, [lock.name for lock in LOCKS]
    assert len(PIP_INSTALLS) >= 14, PIP_INSTALLS


@pytest.mark.parametrize("lock", HASHED_LOCKS, ids=lambda lock: lock.name)
def test_every_pin_of_a_lock_carries_its_hashes(lock: Path) -> None:
    found = entries(lock)
    assert found, f"{lock.name} pins nothing"
    bad = [
        " ".join(entry)[:120]
        for entry in found
        if not PIN.fullmatch(entry[0]) or len(entry) < 2 or not all(HASH.fullmatch(word) for word in entry[1:])
    ]
    assert not bad, f"{lock.name}: pins without --hash=sha256 (make lock-hashes): {bad}"
    names = [entry[0].split("==")[0].lower().replace("_", "-") for entry in found]
    assert len(names) == len(set(names)), f"{lock.name} pins a package twice"
    if lock in VENV_LOCKS:
        assert "pip" in names, f"{lock.name} does not pin pip, which the venv recipe installs from it"
    else:  # the EE's base image brings Debian's pip
        assert "pip" not in names, f"{lock.name}: the EE's pip is the base image's"


def test_the_ee_lock_is_hashed_after_pip_is_taken_out_and_the_makefile_says_why() -> None:
    packaging = recipes(ROOT / "mk" / "packaging.mk")["lock-ee"]
    steps = ["tools/ci/lock.sh --no-hashes $(PY313) requirements/ee.in", "/^pip==/d", "lock_hashes.py hash"]
    order = [next(i for i, line in enumerate(packaging) if step in line) for step in steps]
    assert order == sorted(order), packaging  # resolved, pip dropped (one line, unhashed), then hashed
    text = (ROOT / "mk" / "packaging.mk").read_text(encoding="utf-8")
    assert "checks every wheel it downloads" in text and "which hash-checking mode refuses" in text


def _tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / "packaging" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ansible_builder_is_given_the_ee_locks_pins_without_hashes() -> None:
    plain = _tool("ee_context").plain_pins(EE_LOCK.read_text(encoding="utf-8"))
    lines = [line for line in plain.splitlines() if line and not line.startswith("#")]
    assert lines == [entry[0] for entry in entries(EE_LOCK)] and "--hash" not in plain


def test_the_ee_image_takes_only_wheels_with_a_locks_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib

    ee_image = _tool("ee_image")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    good = wheels / "idna-3.20-py3-none-any.whl"
    good.write_bytes(b"a wheel")
    lock = tmp_path / "lock.txt"
    lock.write_text(f"idna==3.20 \\\n    --hash=sha256:{hashlib.sha256(b'a wheel').hexdigest()}\n")
    monkeypatch.setattr(ee_image, "EE_LOCK", lock)
    monkeypatch.setattr(ee_image, "BUILDER_LOCK", lock)
    (wheels / "dumb_init-1.2.5-py2.py3-none-manylinux_2_5_x86_64.whl").write_bytes(b"pinned by version only")
    ee_image.verify_wheels(wheels)  # passes: the one wheel has the lock's hash
    for name, content in [
        ("idna-3.20-py3-none-any.whl", b"a changed wheel"),  # another file at the pinned version
        ("idna-3.21-py3-none-any.whl", b"a wheel"),  # another version
        ("evil-1.0-py3-none-any.whl", b"a wheel"),  # a package no lock pins
    ]:
        for old in wheels.glob("*.whl"):
            old.unlink()
        (wheels / name).write_bytes(content)
        with pytest.raises(SystemExit):
            ee_image.verify_wheels(wheels)


@pytest.mark.parametrize("rule,line", PIP_INSTALLS, ids=[f"{install[0]}#{n}" for n, install in enumerate(PIP_INSTALLS)])
def test_every_pip_install_checks_hashes(rule: str, line: str) -> None:
    words = line.split()
    assert "--require-hashes" in words, f"{rule}: installs without --require-hashes: {line}"
    assert "$(PIP_ONLY_BINARY)" in words, f"{rule}: installs without $(PIP_ONLY_BINARY) (wheels only): {line}"
    after = [word for word in words[words.index("install") + 1 :] if word != "$(PIP_ONLY_BINARY)"]
    requirements = [after[i + 1] for i, word in enumerate(after) if word in ("-r", "--requirement")]
    constraints = [after[i + 1] for i, word in enumerate(after) if word in ("-c", "--constraint")]
    named = [
        word
        for i, word in enumerate(after)
        if not word.startswith("-") and (i == 0 or after[i - 1] not in ("-r", "--requirement", "-c", "--constraint"))
    ]
    assert not named, f"{rule}: names packages on the command line, outside any hashed lock: {named}"
    assert len(requirements) == 1, f"{rule}: {line}"
    if requirements[0].endswith("/pip-lock.txt"):  # pip's own entry, from `lock_hashes.py select LOCK pip`
        assert "--no-deps" in words and not constraints, f"{rule}: {line}"
    else:
        assert re.fullmatch(r"requirements/[a-z0-9]+\.in", requirements[0]), f"{rule}: {line}"
        assert len(constraints) == 1 and ROOT / constraints[0] in VENV_LOCKS, f"{rule}: not a hashed lock: {line}"


def test_pip_only_binary_defaults_to_wheels_only() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^PIP_ONLY_BINARY \?= --only-binary :all:$", makefile, re.M)


def test_every_venv_gets_pip_and_its_packages_from_one_hashed_lock() -> None:
    installed: set[Path] = set()
    venvs = {name: lines for name, lines in ALL_RECIPES.items() if any(" -m venv " in line for line in lines)}
    assert len(venvs) >= 7, sorted(venvs)
    for name, lines in venvs.items():
        text = "\n".join(lines)
        selected = re.findall(r"tools/ci/lock_hashes\.py select (\S+) pip >(\S+)/pip-lock\.txt", text)
        constrained = re.findall(r"--require-hashes \$\(PIP_ONLY_BINARY\) -r requirements/\S+\.in -c (\S+)", text)
        assert len(selected) == 1 and constrained == [selected[0][0]], f"{name}: {text}"
        # the venv, then pip's entry, then pip, then the packages
        steps = ("-m venv ", "lock_hashes.py select ", "--no-deps -r ", " -c requirements/")
        order = [next(i for i, line in enumerate(lines) if step in line) for step in steps]
        assert order == sorted(set(order)), f"{name}: not in the order {steps}: {text}"
        installed.add(ROOT / selected[0][0])
    assert installed == set(VENV_LOCKS), f"hashed locks no recipe installs: {set(VENV_LOCKS) - installed}"


def test_every_hashed_lock_has_a_lock_target_that_hashes_it() -> None:
    regenerated = {
        ROOT / match
        for lines in ALL_RECIPES.values()
        for line in lines
        if (line.startswith("tools/ci/lock.sh ") and "--no-hashes" not in line)
        or "tools/ci/lock_hashes.py hash " in line
        for match in re.findall(r"requirements/constraints-\S+\.txt", line)
    }
    assert regenerated == set(HASHED_LOCKS)
    lock_sh = (ROOT / "tools" / "ci" / "lock.sh").read_text(encoding="utf-8")
    assert '"$lock_hashes" hash "$constraints.tmp"' in lock_sh


def test_select_and_pins_read_a_hashed_lock(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tool = lock_hashes()
    lock = REQUIREMENTS / "constraints-py313.txt"
    assert tool.main(["select", str(lock), "pip"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert PIN.fullmatch(line.split()[0]) and line.startswith("pip==")
    assert all(HASH.fullmatch(word) for word in line.split()[1:]) and len(line.split()) >= 2
    assert tool.main(["pins", str(lock)]) == 0
    pins = capsys.readouterr().out.splitlines()
    assert pins == [entry[0] for entry in entries(lock)]
    # ee.in constrains itself by the hashed dev lock: lock.sh resolves it against the pins alone
    out = tmp_path / "ee.in"
    assert tool.main(["resolvable", str(REQUIREMENTS / "ee.in"), str(out)]) == 0
    (constraint,) = [line.split()[1] for line in out.read_text().splitlines() if line.startswith("-c ")]
    assert Path(constraint).read_text().splitlines() == pins


def test_a_pin_without_a_hash_is_refused_by_select(tmp_path: Path) -> None:
    lock = tmp_path / "lock.txt"
    lock.write_text("# a lock\npip==26.3\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="has no hash"):
        lock_hashes().main(["select", str(lock), "pip"])


def test_the_security_doc_says_how_the_locks_and_the_collections_are_pinned() -> None:
    doc = " ".join((ROOT / "docs" / "security.md").read_text(encoding="utf-8").split())
    assert "**A supply chain pinned by hash.**" in doc and "**Collection versions pinned in the lock.**" in doc
    assert "`--require-hashes -r X.in -c LOCK`" in doc
    assert "`make lock-hashes`" in doc and "(`--only-binary :all:`)" in doc
    for lock in ("constraints-py313.txt", "constraints-py311.txt"):
        (ansible,) = [entry[0] for entry in entries(REQUIREMENTS / lock) if entry[0].startswith("ansible==")]
        assert f"`{ansible}`" in doc, f"docs/security.md does not name {lock}'s {ansible}"
    for venv in re.findall(r"^(\S+_VENV)\s*:?= *(\.venv\S*)", "\n".join(p.read_text() for p in MAKEFILES), re.M):
        assert f"`{venv[1]}`" in doc, f"docs/security.md does not list {venv[1]}"
