#!/usr/bin/env python
"""Write the execution environment's build context with ansible-builder, offline; no image is built.

    make ee-context
    .venv/bin/python tools/packaging/ee_context.py --venv .venv --builder-venv .venv-builder --context .build/ee

STAGE is where execution-environment.yml's additional_build_files take the collections from
(.build/ee-collections).

1. `ansible-galaxy collection build` (VENV): STAGE/dgxspark-cluster.tar.gz, the tarball Galaxy would get
   (galaxy.yml's build_ignore applied), named without its version, as execution-environment.yml names it.
2. The collections galaxy.yml declares, and those they declare in turn (their MANIFEST.json), copied from
   the `ansible` package in VENV to STAGE/<namespace>/<name>, bytecode caches left out. Galaxy is not
   reachable here; that package installs each collection from its Galaxy release, less its tests and
   development files. Every file is checked against the collection's own FILES.json before it is copied:
   a file the release does not list, or lists with another checksum, stops the script.
3. `ansible-builder create` (BUILDER_VENV) from execution-environment.yml into CONTEXT: the Containerfile
   and _build/ (the requirement files, ansible-builder's scripts, the staged collections).
4. CONTEXT/_build/requirements.txt, ansible-builder's copy of the EE's hashed lock, rewritten as the lock's
   name==version lines: ansible-builder adds the collections' own requirements unpinned, which pip's
   hash-checking mode would refuse; the hashes are checked where the wheels come from (tools/packaging/ee_image.py).

STAGE and CONTEXT are made afresh. tests/ee checks what this writes (make ee-check).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
EE_FILE = "execution-environment.yml"
OWN_TARBALL = "dgxspark-cluster.tar.gz"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def stage_dir() -> Path:
    """The folder execution-environment.yml copies into the context's _build/collections."""
    definition = yaml.safe_load((ROOT / EE_FILE).read_text())
    (source,) = [entry["src"] for entry in definition["additional_build_files"] if entry["dest"] == "collections"]
    return ROOT / source


def build_own(venv: Path, stage: Path) -> None:
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    subprocess.run(
        [str(venv / "bin/ansible-galaxy"), "collection", "build", "--force", "--output-path", str(stage), "."],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    built = stage / f"{galaxy['namespace']}-{galaxy['name']}-{galaxy['version']}.tar.gz"
    built.rename(stage / OWN_TARBALL)
    print(
        f"{galaxy['namespace']}.{galaxy['name']} {galaxy['version']}: {OWN_TARBALL} (ansible-galaxy collection build)"
    )


def _site_collections(venv: Path) -> Path:
    purelib = subprocess.run(
        [str(venv / "bin/python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return Path(purelib) / "ansible_collections"


def checked_copy(source: Path, dest: Path) -> dict[str, Any]:
    """Copy an installed collection after checking every file against its FILES.json; its collection_info."""
    manifest = json.loads((source / "MANIFEST.json").read_text())
    info = manifest["collection_info"]
    name = f"{info['namespace']}.{info['name']} {info['version']}"
    if _sha256(source / "FILES.json") != manifest["file_manifest_file"]["chksum_sha256"]:
        sys.exit(f"ee-context: {name}: FILES.json is not the one its MANIFEST.json names")
    listed = {f["name"]: f["chksum_sha256"] for f in json.loads((source / "FILES.json").read_text())["files"]}
    present = [
        path.relative_to(source).as_posix()
        for path in sorted(source.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    ]
    present = [p for p in present if p not in ("MANIFEST.json", "FILES.json")]
    wrong = [p for p in present if listed.get(p) != _sha256(source / p)]
    if wrong:
        sys.exit(f"ee-context: {name}: not as released (absent from FILES.json or another checksum): {wrong[:10]}")
    left_out = sorted({p.split("/")[0] for p, chksum in listed.items() if chksum and p not in present})
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    print(f"{name}: {len(present)} files as released (the ansible package leaves out: {', '.join(left_out) or '-'})")
    return info


def stage_dependencies(venv: Path, stage: Path) -> None:
    site = _site_collections(venv)
    wanted = list(yaml.safe_load((ROOT / "galaxy.yml").read_text()).get("dependencies") or {})
    done: set[str] = set()
    while wanted:
        fqcn = wanted.pop(0)
        if fqcn in done:
            continue
        namespace, name = fqcn.split(".")
        source = site / namespace / name
        if not (source / "MANIFEST.json").is_file():
            sys.exit(f"ee-context: {fqcn} is not in {site} (the ansible package of {venv})")
        info = checked_copy(source, stage / namespace / name)
        done.add(fqcn)
        wanted.extend(info.get("dependencies") or {})


def create(builder_venv: Path, context: Path) -> None:
    subprocess.run(
        [
            str(builder_venv / "bin/ansible-builder"),
            "create",
            "--file",
            EE_FILE,
            "--context",
            str(context),
            "--output-filename",
            "Containerfile",
            "--verbosity",
            "1",
        ],
        cwd=ROOT,
        check=True,
    )


def plain_pins(lock_text: str) -> str:
    """A hashed lock's text as name==version lines (its comments kept, its --hash options dropped)."""
    lines = []
    for line in lock_text.replace("\\\n", " ").splitlines():
        words = line.split()
        if line.startswith("# Hashes:"):
            lines.append("# The lock's name==version lines (tools/packaging/ee_context.py): its hashes are checked")
            lines.append("# against every wheel of the build when it is downloaded (tools/packaging/ee_image.py).")
        elif not words or line.lstrip().startswith("#"):
            lines.append(line)
        elif "==" in words[0]:
            lines.append(words[0])
    return "\n".join(lines) + "\n"


def unhash_requirements(context: Path) -> None:
    """ansible-builder's copy of the EE's lock in the context, as name==version lines (step 4)."""
    copied = context / "_build" / "requirements.txt"
    if not copied.is_file():
        sys.exit(f"{copied}: ansible-builder wrote no Python requirements (execution-environment.yml's python)")
    copied.write_text(plain_pins(copied.read_text()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, required=True, help="the collection's venv (.venv)")
    parser.add_argument("--builder-venv", type=Path, required=True, help="ansible-builder's venv (.venv-builder)")
    parser.add_argument("--context", type=Path, required=True, help="the build context to write")
    args = parser.parse_args()
    venv, builder_venv = (ROOT / args.venv).absolute(), (ROOT / args.builder_venv).absolute()
    stage, context = stage_dir(), ROOT / args.context
    for path in (stage, context):
        shutil.rmtree(path, ignore_errors=True)
    stage.mkdir(parents=True)
    build_own(venv, stage)
    stage_dependencies(venv, stage)
    create(builder_venv, context)
    unhash_requirements(context)
    print(f"build context: {context.relative_to(ROOT)} (Containerfile, _build/); no image built")
    return 0


if __name__ == "__main__":
    sys.exit(main())
