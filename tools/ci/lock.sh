#!/usr/bin/env bash
# Re-resolve a requirements .in file into a full pinned lock, with hashes.
#
# Usage: tools/ci/lock.sh [--no-hashes] PYTHON REQUIREMENTS.in LOCK.txt SCRATCH_VENV
#
# Creates SCRATCH_VENV afresh with PYTHON, installs the newest pip and then REQUIREMENTS.in
# without the old lock, and writes `pip freeze` (pip included; setuptools and wheel only when a
# package requires them) to LOCK.txt; then tools/ci/lock_hashes.py adds the sha256 of every file
# the index holds for each pinned version (all platforms and Pythons), unless --no-hashes (the EE's
# lock: ansible-builder reads it line by line as name==version). The venv recipes install in pip's
# hash-checking mode: pip from its hashed entry, then `pip install --require-hashes -r X.in -c LOCK.txt`.
#
# This resolve is the one step that trusts the index as it is today: review the diff of the lock.
# `make lock-hashes` re-hashes the existing pins without resolving anything.
set -euo pipefail

hashes=yes
if [[ ${1:-} == --no-hashes ]]; then hashes=no; shift; fi
python=${1:?usage: $0 [--no-hashes] PYTHON REQUIREMENTS.in LOCK.txt SCRATCH_VENV}
requirements=${2:?}
constraints=${3:?}
venv=${4:?}
lock_hashes=$(dirname "$0")/lock_hashes.py

[[ -x $python ]] || { echo "lock: interpreter '$python' not found" >&2; exit 1; }
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
# An .in may constrain itself by another lock (ee.in: -c constraints-py313.txt), whose hashes would turn on
# hash-checking mode for packages that lock lacks: resolve against that lock's pins alone.
"$venv/bin/python" "$lock_hashes" resolvable "$requirements" "$venv/requirements.in"
"$venv/bin/python" -m pip install -q -r "$venv/requirements.in"
"$venv/bin/python" -m pip check
# setuptools and wheel are left out when nothing needs them (Python 3.11's venv bundles setuptools), kept
# when a package requires them (awxkit, pbr and dash do): hash-checking mode refuses an unpinned one.
exclude=()
for bundled in setuptools wheel; do
    if ! "$venv/bin/python" -m pip show "$bundled" 2>/dev/null | grep -q '^Required-by: *[^ ]'; then
        exclude+=(--exclude "$bundled")
    fi
done
{
    echo "# Full lock of $requirements for Python $("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])') (pip freeze of a fresh venv)."
    echo "# Regenerate with: make lock   (do not edit by hand)"
    "$venv/bin/python" -m pip freeze --all "${exclude[@]}"
} >"$constraints.tmp"
if [[ $hashes == yes ]]; then
    "$venv/bin/python" "$lock_hashes" hash "$constraints.tmp"
fi
mv "$constraints.tmp" "$constraints"
rm -rf "$venv"
echo "wrote $constraints ($(grep -c '==' "$constraints") pins)"
