#!/usr/bin/env bash
# Configure the execution environment's base rootfs (sim/images/build.sh ee-base; runs on the build machine).
#
# Usage: sim/images/ee-base/configure.sh ROOTFS
#
# pip, installed by itself from Debian's own wheel (python3-pip-whl, which python3-venv brings) into
# /usr/local, offline: a pip that pip manages, with nothing of Debian's in the way of the EE's pinned packages.
# Debian disables ensurepip for its python3, so ansible-builder's own pip step cannot do this
# (execution-environment.yml: skip_pip_install). Part of the image's inputs: changing it rebuilds the image.
set -euo pipefail
rootfs=${1:?usage: $0 ROOTFS}
wheels=("$rootfs"/usr/share/python-wheels/pip-*.whl)
[[ -f ${wheels[0]} && ${#wheels[@]} == 1 ]] || { echo "configure: no single pip wheel in $rootfs/usr/share/python-wheels" >&2; exit 1; }
wheel=/usr/share/python-wheels/$(basename "${wheels[0]}")
chroot "$rootfs" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root \
    python3 "$wheel/pip" install --quiet --no-index --no-cache-dir --break-system-packages --disable-pip-version-check \
    --root-user-action=ignore "$wheel"
chroot "$rootfs" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin python3 -m pip --version >&2
