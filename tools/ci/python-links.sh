#!/usr/bin/env bash
# Make every CPython that ansible-test may use findable as pythonX.Y on one PATH entry.
#
# Usage: tools/ci/python-links.sh DIR
#
# ansible-test finds interpreters by name (python3.9, python3.12, ...) on PATH. On the CI
# machines they live in pyenv ($PYENV_ROOT/versions/X.Y.Z/bin), whose shims answer
# "command not found" for versions that are not activated. This links each working
# interpreter into DIR; put DIR first on PATH when running ansible-test.
set -euo pipefail

dir=${1:?usage: $0 DIR}
pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
rm -rf "$dir"
mkdir -p "$dir"

found=()
for version in 3.8 3.9 3.10 3.11 3.12 3.13 3.14; do
    candidates=()
    for candidate in "$pyenv_root"/versions/"$version".*/bin/python"$version"; do
        [[ -x $candidate ]] && candidates+=("$candidate")
    done
    # Fall back to PATH (skipping pyenv shims that are not activated).
    if system=$(command -v "python$version" 2>/dev/null); then candidates+=("$system"); fi
    for candidate in "${candidates[@]}"; do
        if "$candidate" -c 'import venv, ensurepip' >/dev/null 2>&1; then
            ln -s "$candidate" "$dir/python$version"
            found+=("$version")
            break
        fi
    done
done
echo "pythons for ansible-test: ${found[*]:-none}"
