# Copyright: dgxspark.cluster maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the collection's modules that ask the node's Docker engine share: the engine's socket, and the platform."""

from __future__ import annotations


class ModuleDocFragment:
    # dgxspark.cluster.docker: the Docker engine's socket (node_facts, node_phase, rank_health, rank_stop,
    # window_job); its spec is module_utils/_docker_module.py's DOCKER_HOST.
    DOCUMENTATION = r"""
options:
  docker_host:
    description:
      - The Docker engine's socket, as a C(unix://) URL. Falls back to the E(DOCKER_HOST) environment variable.
      - The module asks the engine's API over this socket itself (no docker CLI, no community.docker).
    type: str
    default: unix:///var/run/docker.sock
attributes:
  platform:
    support: full
    platforms: posix
    description: A node with a Docker engine.
"""
