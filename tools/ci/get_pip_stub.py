"""Offline stand-in for get-pip.py, used by ansible-test's pip bootstrap.

ansible-test bootstraps pip into every virtual environment it creates by running a
``get-pip.py`` that it downloads from a host this machine cannot reach.  It first looks for
a cached copy at ``~/.ansible/test/cache/get_pip_<version>.py``; ``make sanity`` installs this
file there (see tools/ci/install_get_pip_stub.py).

It is run as ``__main__`` with the arguments ansible-test would give get-pip.py, e.g.
``--disable-pip-version-check pip==25.2 --no-setuptools --no-wheel``.  It bootstraps the
interpreter's bundled pip with ``ensurepip``, then lets that pip install the requested
packages (from PyPI or the configured indexes), dropping get-pip-only flags that pip rejects.

Kept compatible with every Python that ansible-test may target (3.8+).
"""

import subprocess
import sys

# Options understood by get-pip.py but not by ``pip install``.
GET_PIP_ONLY_FLAGS = ("--no-setuptools", "--no-wheel", "--no-pip")


def main():
    args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY_FLAGS]

    # ensurepip has no --quiet: keep its output for the failure message only.
    ensurepip = subprocess.run(
        [sys.executable, "-m", "ensurepip", "--default-pip"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        check=False,
    )
    if ensurepip.returncode != 0:
        sys.stderr.write(ensurepip.stdout.decode("utf-8", "replace"))
        sys.stderr.write(
            f"get_pip_stub: 'python -m ensurepip' failed for {sys.executable} (rc={ensurepip.returncode})\n"
        )
        return ensurepip.returncode

    return subprocess.call([sys.executable, "-m", "pip", "install"] + args)


if __name__ == "__main__":
    sys.exit(main())
