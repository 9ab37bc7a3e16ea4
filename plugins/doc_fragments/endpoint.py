# Copyright: dgxspark.cluster maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The OpenAI endpoint a benchmark sends to, and how: the options bench_run passes on to every bench_load step."""

from __future__ import annotations


class ModuleDocFragment:
    # dgxspark.cluster.endpoint: the benchmark's endpoint (bench_run, bench_load); its spec is
    # module_utils/_specs.py's ENDPOINT.
    DOCUMENTATION = r"""
options:
  url:
    description:
      - The API's base URL as the host the task runs on (the client) reaches it, such as V(http://127.0.0.1:8000)
        (C(/v1) is added).
    type: str
    required: true
  model:
    description: The served model name to ask for.
    type: str
    required: true
  api:
    description: V(chat) for C(/v1/chat/completions), V(completions) for C(/v1/completions).
    type: str
    choices: [chat, completions]
    default: chat
  api_key:
    description: "Sent as C(Authorization: Bearer <key>) when set."
    type: str
  api_key_file:
    description:
      - A file on the host the task runs on holding the key (the profile's C(container.api.api_key_file)), read
        there and sent as O(api_key) is; the key is then never an argument or a result. O(api_key) wins when both
        are given.
    type: str
  ca_file:
    description: With an C(https) O(url), the PEM file (on the host the task runs on) the server's certificate is
      checked against.
    type: str
  validate_certs:
    description: Check the server's certificate (https only).
    type: bool
    default: true
"""
