# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the collection's modules that ask the Docker engine share: the ``docker_host`` option, and an engine
opened from it that fails the module when the option is not a socket URL.

node_facts, node_phase, rank_health, rank_stop and window_job take ``docker_host``; the
``dgxspark.cluster.docker`` doc fragment (plugins/doc_fragments/docker.py) documents it, :data:`DOCKER_HOST` is
its spec. Modules only: this imports AnsibleModule's helpers (controller code imports _docker_engine.py instead).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from ansible.module_utils.basic import env_fallback

from ansible_collections.dgxspark.cluster.plugins.module_utils._docker_engine import (
    DEFAULT_DOCKER_HOST,
    DockerEngine,
    engine_at,
    socket_path,
)

DOCKER_HOST = {
    "docker_host": {"type": "str", "default": DEFAULT_DOCKER_HOST, "fallback": (env_fallback, ["DOCKER_HOST"])},
}


@contextmanager
def module_engine(module: Any, timeout: float) -> Iterator[DockerEngine]:
    """The engine the module's ``docker_host`` names, closed when the block ends. The module fails, before the
    engine is asked anything, when ``docker_host`` is not a ``unix://`` socket URL."""
    try:
        socket_path(module.params["docker_host"])
    except ValueError as error:
        module.fail_json(msg=str(error))
    with engine_at(module.params["docker_host"], timeout) as engine:
        yield engine
