#!/usr/bin/env bash
# Lay out a clean copy of this checkout where ansible-test can test it.
#
# Usage: tools/ci/sanity-tree.sh BUILD_ROOT PYTHON
#
# ansible-test needs the collection at .../ansible_collections/<namespace>/<name>/ inside a git
# checkout whose tree holds exactly the files under test (leftovers such as tests/output/ are
# flagged). So this copies the working tree's tracked and untracked-but-not-ignored files
# (`git ls-files -co --exclude-standard`, i.e. what the next commit would see) to
# BUILD_ROOT/ansible_collections/<namespace>/<name>/, and commits them there in a fresh repository.
#
# The collections named under `dependencies:` in galaxy.yml are linked beside it, from the
# site-packages of PYTHON (the `ansible` package carries them; Galaxy is not reachable), so
# that the import and ansible-doc sanity tests can resolve them as on an installed system.
set -euo pipefail

build_root=${1:?usage: $0 BUILD_ROOT PYTHON}
python=${2:?usage: $0 BUILD_ROOT PYTHON}
src=$(git rev-parse --show-toplevel)

# namespace, name and dependency collections, read from galaxy.yml.
read -r namespace name deps < <("$python" - "$src/galaxy.yml" <<'PY'
import sys

import yaml

with open(sys.argv[1], encoding="utf-8") as handle:
    galaxy = yaml.safe_load(handle)
print(galaxy["namespace"], galaxy["name"], " ".join(sorted(galaxy.get("dependencies") or {})))
PY
)

collections_root="$build_root/ansible_collections"
dest="$collections_root/$namespace/$name"
rm -rf "$collections_root"
mkdir -p "$dest"

# Copy what the next commit would contain; skip files deleted in the work tree but still
# in the index.
(
    cd "$src"
    git ls-files -z -co --exclude-standard |
        while IFS= read -r -d '' path; do
            if [[ -e $path || -L $path ]]; then printf '%s\0' "$path"; fi
        done |
        tar --null --no-recursion -T - -cf -
) | tar -C "$dest" -xf -

git -C "$dest" init -q
git -C "$dest" add -A
git -C "$dest" -c user.name=make-sanity -c user.email=make-sanity@localhost \
    -c commit.gpgsign=false commit -q -m "snapshot of $src for ansible-test"
echo "sanity tree: $dest ($(git -C "$dest" ls-files | wc -l) files)"

# Dependency collections, from the `ansible` package in PYTHON's site-packages.
for dep in $deps; do
    dep_path=$("$python" - "$dep" <<'PY'
import os
import sys

import ansible_collections

namespace, name = sys.argv[1].split(".")
for root in ansible_collections.__path__:
    candidate = os.path.join(root, namespace, name)
    if os.path.isdir(candidate):
        print(candidate)
        break
PY
)
    if [[ -z $dep_path ]]; then
        echo "sanity-tree: collection $dep (galaxy.yml dependency) is not installed for $python" >&2
        exit 1
    fi
    mkdir -p "$collections_root/${dep%%.*}"
    ln -s "$dep_path" "$collections_root/${dep%%.*}/${dep#*.}"
    echo "dependency: $dep -> $dep_path"
done
