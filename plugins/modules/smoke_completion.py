#!/usr/bin/python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot's smoke completion, timed (logic in module_utils/_bench_client.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: smoke_completion
short_description: One streamed completion at temperature 0 whose answer must match, with its first-token time
version_added: 0.1.0
description:
  - Sends one streamed completion to an OpenAI-compatible server (the head, over loopback) at temperature 0 and
    fails unless it answers and the answer matches O(expect). A stack that serves garbled output fails here.
  - Reports the time to the first token and to the end of the answer, measured where the request is sent (the
    benchmark client's timing, docs/benchmark.md).
author:
  - dgxspark.cluster maintainers (@dgxspark)
options:
  url:
    description: The API's base URL, such as V(http://127.0.0.1:8000) or V(https://192.0.2.10:8000).
    type: str
    required: true
  api_key_file:
    description:
      - A file on the host that sends the request holding the API's key (the profile's C(container.api.api_key_file)),
        sent in an C(Authorization) header (Bearer). The module reads it there; the key is never an argument or a
        result.
    type: str
  ca_file:
    description: With an C(https) O(url), the PEM file the server's certificate is checked against (on that host).
    type: str
  model:
    description: The served model's name.
    type: str
    required: true
  prompt:
    description: The prompt.
    type: str
    default: "Count from 1 to 10:"
  expect:
    description: A regular expression (case-insensitive) the answer must match.
    type: str
    default: '1\D+2\D+3\D+4\D+5\D+6\D+7\D+8\D+9\D+10'
  max_tokens:
    description: The completion's max_tokens.
    type: int
    default: 32
  timeout:
    description: Seconds the whole answer may take.
    type: float
    default: 120
extends_documentation_fragment:
  - dgxspark.cluster.attributes
attributes:
  check_mode:
    support: none
    description: It sends a request; boots skip it in check mode.
  platform:
    support: full
    platforms: posix
    description: Any host that reaches the API.
"""

EXAMPLES = r"""
- name: Ask for a smoke completion
  dgxspark.cluster.smoke_completion:
    url: http://127.0.0.1:8000
    model: v41-flash-1017
"""

RETURN = r"""
text:
  description: The answer.
  returned: always
  type: str
sent_at:
  description: When the request was sent (epoch seconds, the clock of the host that sent it).
  returned: always
  type: float
ttft:
  description: Seconds from sending the request to its first token.
  returned: always
  type: float
e2e:
  description: Seconds from sending the request to the end of the answer.
  returned: always
  type: float
output_tokens:
  description: Tokens in the answer, from the server's usage report.
  returned: always
  type: int
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgxspark.cluster.plugins.module_utils._bench_client import Endpoint, smoke

ARGUMENT_SPEC = {
    "url": {"type": "str", "required": True},
    "api_key_file": {"type": "str", "no_log": False},
    "ca_file": {"type": "str"},
    "model": {"type": "str", "required": True},
    "prompt": {"type": "str", "default": "Count from 1 to 10:"},
    "expect": {"type": "str", "default": r"1\D+2\D+3\D+4\D+5\D+6\D+7\D+8\D+9\D+10"},
    "max_tokens": {"type": "int", "default": 32, "no_log": False},
    "timeout": {"type": "float", "default": 120},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=False)
    params = module.params
    try:
        endpoint = Endpoint(
            params["url"], api="completions", api_key_file=params["api_key_file"], ca_file=params["ca_file"]
        )
        if endpoint.api_key:
            module.no_log_values.add(endpoint.api_key)
        result = smoke(
            endpoint, params["model"], params["prompt"], params["expect"], params["max_tokens"], params["timeout"]
        )
    except ValueError as error:
        module.fail_json(msg=str(error))
    if not result["ok"]:
        module.fail_json(msg=f"the smoke completion failed: {result['error']}", **result)
    if not result["passed"]:
        module.fail_json(
            msg=f"the smoke completion's answer does not match {params['expect']}: {result['text'][:300]!r}", **result
        )
    module.exit_json(
        changed=False, msg=f"answered in {result['e2e']:.2f} s, first token after {result['ttft']:.3f} s", **result
    )


if __name__ == "__main__":
    main()
