# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A function of the collection's Python, imported at its first call: what the filter files import through.

Ansible imports every filter file of a collection in each worker process that templates any one of its
filters, and a worker is a process per host and task. A filter file that imported the plan's modules at its
top (the profile's schema, the vLLM option table, the fabric planner) made every such task, on every host,
compile them all again: about 0.25 s for a ``set_fact`` that only wanted one small filter. Through this, a
filter file costs its own few lines until one of its filters runs.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

PLUGINS = "ansible_collections.dgxspark.cluster.plugins."


def lazy(module: str, name: str) -> Callable[..., Any]:
    """``name`` of ``plugins/<module>`` (dotted, e.g. ``plugin_utils._api``), imported when first called."""

    @functools.lru_cache(maxsize=1)
    def target() -> Callable[..., Any]:
        return getattr(importlib.import_module(PLUGINS + module), name)

    def call(*args: Any, **kwargs: Any) -> Any:
        return target()(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    return call
