# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Real memory held by the engine, so that MemAvailable drops and a memory guard sees it.

Anonymous private mappings, every page written (a page that is only mapped costs nothing).
"""

from __future__ import annotations

import mmap
import threading

MIB = 1 << 20
_PATTERN = b"\x5a" * MIB


class MemoryHold:
    def __init__(self):
        self._maps: dict[str, list[mmap.mmap]] = {}
        self._lock = threading.Lock()

    def grow(self, name: str, mib: float) -> None:
        """Map and touch ``mib`` MiB more under ``name``."""
        size = int(mib * MIB)
        if size <= 0:
            return
        m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        for off in range(0, size, MIB):
            n = min(MIB, size - off)
            m[off : off + n] = _PATTERN[:n]
        with self._lock:
            self._maps.setdefault(name, []).append(m)

    def held_mib(self, name: str | None = None) -> float:
        with self._lock:
            maps = self._maps.get(name, []) if name else [m for ms in self._maps.values() for m in ms]
            return sum(len(m) for m in maps) / MIB

    def release(self, name: str | None = None) -> None:
        with self._lock:
            names = [name] if name else list(self._maps)
            for n in names:
                for m in self._maps.pop(n, []):
                    m.close()
