"""Install tools/ci/get_pip_stub.py where ansible-test looks for a cached get-pip.py.

Run it with the Python of the venv whose ansible-test will be used:

    .venv/bin/python tools/ci/install_get_pip_stub.py

It asks that ansible-test which pip version it bootstraps for each Python it supports and
copies the stub to ``~/.ansible/test/cache/get_pip_<version>.py`` for each of them (2.21 asks
for get_pip_25_2.py, 2.19 for get_pip_24_2.py).  A file there that is not this stub (a real
get-pip.py that ansible-test downloaded on a machine with full internet) is left alone.
"""

import filecmp
import os
import shutil
import sys
import types

try:
    from ansible_test._internal.python_requirements import get_venv_packages
    from ansible_test._util.target.common.constants import (
        CONTROLLER_PYTHON_VERSIONS,
        REMOTE_ONLY_PYTHON_VERSIONS,
    )
except ImportError as exc:  # pragma: no cover - only on an ansible-core layout change
    sys.exit(f"install_get_pip_stub: cannot read ansible-test's pip version ({exc}); ansible-core changed its layout")


# First line of the stub's docstring: identifies an installed copy of it (possibly an older one).
MARKER = "Offline stand-in for get-pip.py, used by ansible-test's pip bootstrap."


def main() -> int:
    stub = os.path.join(os.path.dirname(os.path.abspath(__file__)), "get_pip_stub.py")
    cache = os.path.expanduser("~/.ansible/test/cache")
    os.makedirs(cache, exist_ok=True)

    pythons = CONTROLLER_PYTHON_VERSIONS + REMOTE_ONLY_PYTHON_VERSIONS
    versions = sorted({get_venv_packages(types.SimpleNamespace(version=v))["pip"] for v in pythons})
    for pip_version in versions:
        target = os.path.join(cache, "get_pip_{}.py".format(pip_version.replace(".", "_")))
        if os.path.exists(target) and not filecmp.cmp(stub, target, shallow=False):
            with open(target, encoding="utf-8", errors="replace") as handle:
                if MARKER not in handle.read():
                    print(f"get-pip for pip {pip_version}: keeping existing {target}")
                    continue
        if not (os.path.exists(target) and filecmp.cmp(stub, target, shallow=False)):
            shutil.copyfile(stub, target)
        print(f"get-pip stand-in for pip {pip_version}: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
