#!/usr/bin/env python
"""Build the execution environment's image offline from the build context (make ee-image), cached by its inputs.

    make ee-image
    .venv/bin/python tools/packaging/ee_image.py --context .build/ee --pip-python .venv-builder/bin/python

CONTEXT is what `make ee-context` wrote (tools/packaging/ee_context.py: the Containerfile and _build/). No registry
and no package index is reached from inside the build:

1. The base image, dgxspark-ee/base:<hash> (also :trixie, the name execution-environment.yml gives it): Debian
   trixie minbase from Debian's archive, debootstrap and `docker import`, by the simulated cluster's own image
   machinery (`sim/images/build.sh ee-base`), cached by the digest of its inputs as the sim's images are.
2. The inputs' digest: the base image's, the context's files (the collection tarball by its members, not its
   bytes, which carry build times), the requirements the wheels are downloaded for and this script. The image is
   dgxspark-ee/ee:<digest>; when it exists nothing else is done. It is also tagged dgxspark-ee/ee:latest, and
   CACHE/current.env says both (EE_IMAGE=..., EE_BASE_IMAGE=...).
3. The wheels, downloaded here, on the host, where PyPI is reachable (from inside `docker build` on this kind of
   machine it is not: the egress proxy's certificate authority is the host's alone, so pip fails to verify
   pypi.org): the EE's lock (requirements/constraints-ee-py313.txt: ansible-core, ansible-runner and the Python
   requirements), ansible-builder's bindep with its dependencies at .venv-builder's pins
   (requirements/constraints-builder-py313.txt) and the dumb-init the Containerfile installs. Binary wheels only,
   for CPython 3.13 on glibc 2.41 (Debian trixie), kept in CACHE/wheels/<digest of what was asked>/ and linked
   into CONTEXT/wheels/. execution-environment.yml's additional_build_steps copy them into the base stage and
   write an /etc/pip.conf (no-index, find-links) that every pip install of the build follows, removed again at
   the end of the final stage.
4. `docker build` (the classic builder: a local FROM image, never a pull), the base given by its digest tag;
   then the images of the other stages' steps are removed. Older dgxspark-ee/ee:<digest> tags are dropped (an
   image a container still uses stays).

One build at a time (a lock in CACHE). Progress and timings go to stderr; stdout is current.env's lines.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REPOSITORY = "dgxspark-ee/ee"
STABLE_TAG = "latest"
EE_LOCK = ROOT / "requirements" / "constraints-ee-py313.txt"
BUILDER_LOCK = ROOT / "requirements" / "constraints-builder-py313.txt"
# What the wheels are for: the base image's python3 and C library (Debian trixie: CPython 3.13, glibc 2.41).
TARGET_PYTHON = "3.13"
TARGET_GLIBC = (2, 41)
# The folder beside _build/ that the Containerfile copies (execution-environment.yml, prepend_base).
WHEELS = "wheels"


def say(message: str) -> None:
    print(f"ee-image: {message}", file=sys.stderr, flush=True)


def die(message: str) -> None:
    say(f"ERROR: {message}")
    sys.exit(1)


def docker(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        die(f"docker {' '.join(args)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def image_exists(tag: str) -> bool:
    return docker("image", "inspect", tag, check=False).returncode == 0


def _pins(lock: Path) -> dict[str, str]:
    """canonical name -> the lock's requirement (name==version), from a plain or a hashed lock (a requirement,
    then its ``--hash=sha256:...`` options on continuation lines)."""
    pins = {}
    for line in lock.read_text().replace("\\\n", " ").splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            requirement = line.split()[0]
            pins[re.sub(r"[-_.]+", "-", requirement.split("==")[0]).lower()] = requirement
    return pins


def wheel_requirements(context: Path) -> tuple[str, str]:
    """What to download: (requirements, constraints), as the text of pip's files.

    The EE's lock, whole; bindep (the builder stage's `pip install bindep pyyaml packaging`) at .venv-builder's
    pin, its dependencies constrained by the builder lock where the EE's lock does not pin them; dumb-init as the
    Containerfile names it."""
    containerfile = (context / "Containerfile").read_text()
    init = re.findall(r"pip install --no-cache-dir '([^']+)'", containerfile)
    if len(init) != 1 or not init[0].startswith("dumb-init=="):
        die(f"{context}/Containerfile: expected one pinned dumb-init install, found {init}")
    if "pip install --no-cache-dir bindep pyyaml packaging" not in containerfile:
        die(f"{context}/Containerfile: the builder stage's bindep install is not the one this script downloads for")
    ee, builder = _pins(EE_LOCK), _pins(BUILDER_LOCK)
    requirements = [*ee.values(), builder["bindep"], init[0]]
    constraints = [line for name, line in builder.items() if name not in ee]
    return "\n".join(requirements) + "\n", "\n".join(constraints) + "\n"


def _tarball_digest(path: Path, digest: hashlib._Hash) -> None:
    """A .tar.gz by its members: names, types, modes, link targets and contents (not times or owners)."""
    with tarfile.open(path) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            digest.update(f"{member.name}\0{member.type!r}\0{member.mode:o}\0{member.linkname}\0".encode())
            if member.isfile():
                handle = tar.extractfile(member)
                assert handle is not None
                digest.update(hashlib.sha256(handle.read()).digest())


def inputs_digest(context: Path, base_image: str, requirements: tuple[str, str]) -> str:
    digest = hashlib.sha256()
    digest.update(f"base={base_image}\0target={TARGET_PYTHON},{target_platforms()}\0".encode())
    for text in (*requirements, Path(__file__).read_text()):
        digest.update(hashlib.sha256(text.encode()).digest())
    files = sorted(
        path
        for path in context.rglob("*")
        if path.is_file() and path.relative_to(context).parts[0] != WHEELS and "__pycache__" not in path.parts
    )
    for path in files:
        digest.update(f"{path.relative_to(context).as_posix()}\0".encode())
        if path.name.endswith(".tar.gz"):
            _tarball_digest(path, digest)
        else:
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:12]


def base_image() -> str:
    """sim/images/build.sh ee-base: dgxspark-ee/base:<hash>, built or found."""
    proc = subprocess.run(
        [str(ROOT / "sim/images/build.sh"), "ee-base"], stdout=subprocess.PIPE, text=True, check=False
    )
    match = re.search(r"^EE_BASE_IMAGE=(\S+)$", proc.stdout, re.M)
    if proc.returncode != 0 or not match:
        die("the base image was not built (sim/images/build.sh ee-base; see above)")
    return match[1]


def target_platforms() -> list[str]:
    """Every manylinux tag the base image's C library runs: pip expands only the legacy aliases by itself."""
    arch = platform.machine()
    major, minor = TARGET_GLIBC
    tags = [f"manylinux_{major}_{m}_{arch}" for m in range(minor, 4, -1)]
    return [*tags, *(f"{alias}_{arch}" for alias in ("manylinux2014", "manylinux2010", "manylinux1"))]


def download_wheels(cache: Path, pip_python: Path, requirements: tuple[str, str]) -> Path:
    """CACHE/wheels/<digest>/: the wheels of `requirements`, downloaded once."""
    spec = hashlib.sha256(
        f"{requirements[0]}\0{requirements[1]}\0{TARGET_PYTHON}\0{target_platforms()}".encode()
    ).hexdigest()[:12]
    wheels = cache / "wheels" / spec
    if (wheels / ".complete").is_file():
        say(f"wheels: {len(list(wheels.glob('*.whl')))} cached in {wheels.relative_to(ROOT)}")
        return wheels
    start = time.monotonic()
    partial = wheels.with_name(f"{spec}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    (partial / "requirements.txt").write_text(requirements[0])
    (partial / "constraints.txt").write_text(requirements[1])
    glibc = ".".join(map(str, TARGET_GLIBC))
    say(f"wheels: pip download from PyPI (CPython {TARGET_PYTHON}, glibc {glibc} or older, {platform.machine()})")
    proc = subprocess.run(
        [
            str(pip_python),
            "-m",
            "pip",
            "download",
            "--quiet",
            "--only-binary=:all:",
            "--implementation",
            "cp",
            "--python-version",
            TARGET_PYTHON,
            "--abi",
            f"cp{TARGET_PYTHON.replace('.', '')}",
            *(f"--platform={tag}" for tag in target_platforms()),
            "--dest",
            str(partial),
            "--requirement",
            str(partial / "requirements.txt"),
            "--constraint",
            str(partial / "constraints.txt"),
        ],
        check=False,
    )
    if proc.returncode != 0:
        die("pip download failed (above): the EE's wheels come from PyPI, on this machine")
    for stale in (cache / "wheels").iterdir():
        if stale.is_dir() and stale.name != partial.name:
            shutil.rmtree(stale)
    (partial / ".complete").write_text(f"{time.monotonic() - start:.0f}s\n")
    partial.rename(wheels)
    say(f"wheels: {len(list(wheels.glob('*.whl')))} downloaded in {time.monotonic() - start:.0f}s")
    return wheels


def _lock_hashes(lock: Path) -> dict[str, tuple[str, set[str]]]:
    """canonical name -> (version, the sha256 of every file of it) from a hashed lock."""
    found = {}
    for line in lock.read_text().replace("\\\n", " ").splitlines():
        words = line.split("#")[0].split()
        if words and "==" in words[0]:
            name, version = words[0].split("==", 1)
            hashes = {word.removeprefix("--hash=sha256:") for word in words[1:] if word.startswith("--hash=sha256:")}
            found[re.sub(r"[-_.]+", "-", name).lower()] = (version, hashes)
    return found


# Pinned by ansible-builder's Containerfile (its dumb-init install), in none of the locks: downloaded at that pin,
# not checked against a hash (docs/security.md says so).
UNLOCKED = ("dumb-init",)


def verify_wheels(wheels: Path) -> None:
    """Every wheel the build installs is one the locks pin, at its pinned version, with one of the sha256 the lock
    holds for that version (the EE's lock, then the builder lock for bindep and its dependencies): pip's
    hash-checking mode, done here because ansible-builder's own pip lines cannot carry the hashes (mk/packaging.mk).
    Checked on every build, cached wheels too."""
    locks = {**_lock_hashes(BUILDER_LOCK), **_lock_hashes(EE_LOCK)}
    bad = []
    checked = 0
    for wheel in sorted(wheels.glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        canonical = re.sub(r"[-_.]+", "-", name).lower()
        if canonical in UNLOCKED:
            continue
        pinned = locks.get(canonical)
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if pinned is None:
            bad.append(f"{wheel.name}: no lock pins {canonical}")
        elif pinned[0] != version:
            bad.append(f"{wheel.name}: the lock pins {canonical}=={pinned[0]}")
        elif digest not in pinned[1]:
            bad.append(f"{wheel.name}: sha256 {digest} is not one of the lock's {len(pinned[1])} for {version}")
        checked += 1
    if bad:
        die(
            "wheels that do not match the locks' hashes (make lock-hashes, or a changed file on the index):\n  "
            + "\n  ".join(bad)
        )
    say(f"wheels: {checked} checked against the locks' sha256 ({', '.join(UNLOCKED)} pinned by version only)")


def stage_wheels(wheels: Path, context: Path) -> None:
    """CONTEXT/wheels/: the wheels, hard links where the file system allows."""
    target = context / WHEELS
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir()
    for wheel in sorted(wheels.glob("*.whl")):
        try:
            os.link(wheel, target / wheel.name)
        except OSError:
            shutil.copy2(wheel, target / wheel.name)


def prune(keep: str) -> None:
    """Drop the older dgxspark-ee/ee:<digest> tags (an image a container uses stays)."""
    tags = docker("images", "--format", "{{.Repository}}:{{.Tag}}", REPOSITORY).stdout.split()
    for tag in tags:
        if tag not in (f"{REPOSITORY}:{keep}", f"{REPOSITORY}:{STABLE_TAG}"):
            docker("rmi", tag, check=False)


def build(context: Path, cache: Path, base: str, image: str, digest: str) -> None:
    log = cache / "build.log"
    start = time.monotonic()
    say(f"{image}: docker build FROM {base} (log {log.relative_to(ROOT)})")
    with log.open("w") as out:
        proc = subprocess.run(
            [
                "docker",
                "build",
                "--force-rm",
                "--file",
                str(context / "Containerfile"),
                "--build-arg",
                f"EE_BASE_IMAGE={base}",
                "--label",
                f"org.dgxspark-ee.inputs={digest}",
                "--tag",
                image,
                str(context),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "DOCKER_BUILDKIT": "0"},
            check=False,
        )
    if proc.returncode != 0:
        sys.stderr.write("".join(log.read_text().splitlines(keepends=True)[-40:]))
        die(f"docker build of {image} failed (log: {log})")
    say(f"{image}: built in {time.monotonic() - start:.0f}s")
    drop_stages(log.read_text(), image)


def drop_stages(log: str, image: str) -> None:
    """Remove what the build left of its other stages (galaxy, builder): the images of their steps, which the
    image does not contain. The classic builder keeps them untagged; a rebuild would not use them (the context
    they copied changed), and each would keep hundreds of MB. An image that another still needs stays."""
    kept = set(docker("history", "--quiet", image).stdout.split())
    steps = re.findall(r"^ ---> ([0-9a-f]{12})$", log, re.M)
    for step in reversed(steps):
        if not any(step.startswith(k) or k.startswith(step) for k in kept):
            docker("rmi", step, check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context", type=Path, required=True, help="the build context (make ee-context)")
    parser.add_argument("--pip-python", type=Path, required=True, help="the Python whose pip downloads the wheels")
    parser.add_argument("--cache", type=Path, default=Path(".cache/ee"), help="wheels, the build log, current.env")
    args = parser.parse_args()
    context, cache = (ROOT / args.context).absolute(), (ROOT / args.cache).absolute()
    if not (context / "Containerfile").is_file():
        die(f"no build context in {context}: make ee-context")
    cache.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with (cache / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        base = base_image()
        requirements = wheel_requirements(context)
        digest = inputs_digest(context, base, requirements)
        image = f"{REPOSITORY}:{digest}"
        if image_exists(image):
            say(f"{image}: present (inputs unchanged)")
        else:
            wheels = download_wheels(cache, (ROOT / args.pip_python).absolute(), requirements)
            verify_wheels(wheels)
            stage_wheels(wheels, context)
            build(context, cache, base, image, digest)
            shutil.rmtree(context / WHEELS)
        docker("tag", image, f"{REPOSITORY}:{STABLE_TAG}")
        prune(digest)
        current = f"EE_IMAGE={image}\nEE_BASE_IMAGE={base}\n"
        (cache / "current.env.tmp").write_text(current)
        (cache / "current.env.tmp").rename(cache / "current.env")
    sys.stdout.write(current)
    say(f"done in {time.monotonic() - start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
