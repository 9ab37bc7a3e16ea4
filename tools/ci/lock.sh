#!/usr/bin/env bash
# Re-resolve a requirements .in file into a full pinned lock.
#
# Usage: tools/ci/lock.sh PYTHON REQUIREMENTS.in CONSTRAINTS.txt SCRATCH_VENV
#
# Creates SCRATCH_VENV afresh with PYTHON, installs the newest pip and then REQUIREMENTS.in
# without the old lock, and writes `pip freeze` (pip included, setuptools/wheel left out)
# to CONSTRAINTS.txt. `make venv` / `make compat-venv` install with `-c CONSTRAINTS.txt`.
set -euo pipefail

python=${1:?usage: $0 PYTHON REQUIREMENTS.in CONSTRAINTS.txt SCRATCH_VENV}
requirements=${2:?}
constraints=${3:?}
venv=${4:?}

[[ -x $python ]] || { echo "lock: interpreter '$python' not found" >&2; exit 1; }
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -r "$requirements"
"$venv/bin/python" -m pip check
{
    echo "# Full lock of $requirements for Python $("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])') (pip freeze of a fresh venv)."
    echo "# Regenerate with: make lock   (do not edit by hand)"
    "$venv/bin/python" -m pip freeze --all --exclude setuptools --exclude wheel
} >"$constraints.tmp"
mv "$constraints.tmp" "$constraints"
rm -rf "$venv"
echo "wrote $constraints ($(grep -c '==' "$constraints") pins)"
