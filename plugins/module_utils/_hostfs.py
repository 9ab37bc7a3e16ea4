# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading procfs and sysfs (or a test tree laid out like them) without raising.

A file that is absent, or that the kernel refuses to read because the thing it describes has no value
right now (sysfs answers EINVAL for the speed of a link that is down, and for the type of an unused GID
entry), reads as ``None`` and is not a problem. Any other error (permission denied, I/O error) also reads
as ``None`` but is recorded, with the path, in ``problems``: the caller reports what it could read.
"""

from __future__ import annotations

import errno
import os
from typing import Dict

# errno values meaning "no value here now" rather than "something is wrong".
QUIET_ERRNOS = frozenset(
    {errno.ENOENT, errno.ENOTDIR, errno.EINVAL, errno.ENODEV, errno.ENXIO, errno.EOPNOTSUPP, errno.ENODATA}
)

Problem = Dict[str, str]


def is_quiet(error: OSError) -> bool:
    """True when ``error`` means the attribute has no value now (absent, link down, device gone)."""
    return error.errno in QUIET_ERRNOS


def problem(section: str, source: str, message: str) -> Problem:
    return {"section": section, "source": source, "message": message}


class HostFiles:
    """Reads small text files and directory listings; collects unexpected errors in ``problems``."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems

    def read(self, path: str, section: str) -> str | None:
        """The file's text with trailing whitespace removed, or ``None``."""
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                return handle.read().rstrip()
        except OSError as error:
            self._record(error, path, section)
            return None

    def read_int(self, path: str, section: str) -> int | None:
        text = self.read(path, section)
        if text is None:
            return None
        try:
            return int(text)
        except ValueError:
            self.problems.append(problem(section, path, f"expected an integer, found {text[:80]!r}"))
            return None

    def first_line_with(self, path: str, prefix: str, section: str) -> str | None:
        """The first line of a (possibly long) file that starts with ``prefix``; stops reading there."""
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    if line.startswith(prefix):
                        return line.rstrip("\n")
        except OSError as error:
            self._record(error, path, section)
        return None

    def listdir(self, path: str, section: str) -> list[str]:
        """Sorted entry names, or ``[]`` when the directory is absent or unreadable."""
        try:
            return sorted(os.listdir(path))
        except OSError as error:
            self._record(error, path, section)
            return []

    def _record(self, error: OSError, path: str, section: str) -> None:
        if not is_quiet(error):
            self.problems.append(problem(section, path, error.strerror or str(error)))
