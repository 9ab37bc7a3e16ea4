#!/usr/bin/python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One step of a benchmark, sent from this host (logic in module_utils/_bench_client.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: bench_load
short_description: Send one step of a benchmark to an OpenAI endpoint and time every request
version_added: 0.1.0
description:
  - Runs on the host the benchmark is sent from and talks to the serving cluster's OpenAI API with streamed
    requests, timing each on this host's monotonic clock (docs/benchmark.md has the definitions).
  - O(mode=gate) sends each functional check once; O(mode=load) sends O(requests) requests, O(concurrency)
    at a time, each user sending its next request as soon as its previous one ended; O(mode=needle) sends one
    needle-in-a-haystack request.
  - Nothing is retried; a failed request is returned as a record with its reason.
  - Standard library only. C(dgxspark.cluster.bench_run) calls it once per step and prints the progress;
    use that, or this module for a single step.
author:
  - dgxspark.cluster maintainers (@dgxspark)
options:
  mode:
    description: Which step to run.
    type: str
    choices: [gate, load, needle]
    required: true
  concurrency:
    description: Requests in flight at once (O(mode=load)).
    type: int
    default: 1
  requests:
    description: Requests to send in all (O(mode=load)).
    type: int
    default: 100
  first_index:
    description:
      - Number of the first request (O(mode=load)); its prompt and its C(i) follow from it. C(bench_run) sends a long
        level in parts, each starting where the previous one ended, so that it can print progress between them.
    type: int
    default: 0
  ramp:
    description:
      - Seconds over which the users' first requests are spread evenly (O(mode=load)); V(0) starts them all at once.
    type: float
    default: 0
  prompt_tokens:
    description: About how many tokens each synthetic prompt has (4 characters a token; every prompt is unique).
    type: int
    default: 128
  max_tokens:
    description:
      - Output tokens asked for. With O(mode=load) every answer is asked to be exactly this long (vLLM's
        C(ignore_eos) and C(min_tokens)); the gate and the needle take the answer as it comes.
    type: int
    default: 128
  timeout:
    description: Seconds one request may take from send to the end of its stream.
    type: float
    default: 600
  seed:
    description: Seed of the synthetic prompts and the haystack (same seed, same text).
    type: int
    default: 0
  extra_body:
    description: More fields for every request body, such as C(top_p) or C(seed).
    type: dict
  checks:
    description:
      - The functional checks (O(mode=gate)); each passes when its regular expression C(expect) finds
        the answer (case-insensitive).
    type: list
    elements: dict
    default: []
  needle_tokens:
    description: About how many tokens the haystack has (O(mode=needle)).
    type: int
    default: 32768
  needle_depth:
    description: Where the needle sits in the haystack, from 0 (start) to 1 (end).
    type: float
    default: 0.5
  max_model_len:
    description:
      - The context limit the needle must fit (O(mode=needle)), prompt and answer together; the smaller of this
        and the server's own (its C(/tokenize) or C(/v1/models) answer) applies. A needle that does not fit is
        refused (C(refused) true) and nothing is sent.
    type: int
extends_documentation_fragment:
  - dgxspark.cluster.endpoint
  - dgxspark.cluster.attributes
attributes:
  check_mode:
    support: full
    description: Sends nothing in check mode and says so.
  platform:
    support: full
    platforms: posix
    description: Any host that reaches the endpoint.
"""

EXAMPLES = r"""
- name: Eight users at once, 200 requests, from the head
  dgxspark.cluster.bench_load:
    url: http://127.0.0.1:8000
    model: v41-flash-1017
    mode: load
    concurrency: 8
    requests: 200
"""

RETURN = r"""
gate:
  description: O(mode=gate) - passed, and per check the name, prompt, expected, got, passed, error, seconds.
  returned: mode is gate
  type: dict
level:
  description:
    - O(mode=load) - concurrency, requests (one record each, docs/benchmark.md) and client (wall_s, cpu_s,
      cpu_share, loop_lag of this host's event loop).
  returned: mode is load
  type: dict
needle:
  description:
    - O(mode=needle) - context_tokens (the server's C(usage.prompt_tokens); C(counted_by) says whether it came
      from C(usage), C(tokenize) or the 4-characters C(estimate)), requested_tokens, tokenized_tokens,
      max_model_len, refused, found, seconds, ttft, started_at, finished_at (epoch seconds), expected, got,
      error.
  returned: mode is needle
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgxspark.cluster.plugins.module_utils._bench_client import (
    Endpoint,
    run_gate,
    run_level,
    run_needle,
)
from ansible_collections.dgxspark.cluster.plugins.module_utils._specs import ENDPOINT

ARGUMENT_SPEC = {
    **ENDPOINT,
    "mode": {"type": "str", "choices": ["gate", "load", "needle"], "required": True},
    "concurrency": {"type": "int", "default": 1},
    "requests": {"type": "int", "default": 100},
    "ramp": {"type": "float", "default": 0},
    "first_index": {"type": "int", "default": 0},
    "prompt_tokens": {"type": "int", "default": 128, "no_log": False},
    "max_tokens": {"type": "int", "default": 128, "no_log": False},
    "timeout": {"type": "float", "default": 600},
    "seed": {"type": "int", "default": 0},
    "extra_body": {"type": "dict"},
    "checks": {"type": "list", "elements": "dict", "default": []},
    "needle_tokens": {"type": "int", "default": 32768, "no_log": False},
    "needle_depth": {"type": "float", "default": 0.5},
    "max_model_len": {"type": "int"},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    if module.check_mode:
        module.exit_json(changed=False, msg=f"check mode: no {params['mode']} request was sent")
    for name in ("concurrency", "requests", "prompt_tokens", "max_tokens", "needle_tokens"):
        if params[name] < 1:
            module.fail_json(msg=f"{name} must be at least 1, got {params[name]}")
    if not 0 <= params["needle_depth"] <= 1:
        module.fail_json(msg=f"needle_depth must be between 0 and 1, got {params['needle_depth']}")
    try:
        endpoint = Endpoint(
            params["url"],
            params["api_key"],
            params["api"],
            params["validate_certs"],
            api_key_file=params["api_key_file"],
            ca_file=params["ca_file"],
        )
        if endpoint.api_key:
            module.no_log_values.add(endpoint.api_key)
        extra = params["extra_body"]
        if params["mode"] == "gate":
            if not params["checks"]:
                module.fail_json(msg="mode=gate needs at least one check")
            for check in params["checks"]:
                if not check.get("prompt") or not check.get("expect"):
                    module.fail_json(msg=f"every check needs prompt and expect, got {check!r}")
            module.exit_json(
                changed=False, gate=run_gate(endpoint, params["model"], params["checks"], params["timeout"], extra)
            )
        # what every request of a level or a needle shares
        sent = {"timeout": params["timeout"], "seed": params["seed"], "extra": extra}
        if params["mode"] == "load":
            size = (params["concurrency"], params["requests"], params["prompt_tokens"], params["max_tokens"])
            level = run_level(
                endpoint, params["model"], *size, ramp=params["ramp"], first_index=params["first_index"], **sent
            )
            module.exit_json(changed=False, level=level)
        needle = run_needle(
            endpoint,
            params["model"],
            params["needle_tokens"],
            params["needle_depth"],
            max_model_len=params["max_model_len"],
            **sent,
        )
        module.exit_json(changed=False, needle=needle)
    except ValueError as error:
        module.fail_json(msg=str(error))


if __name__ == "__main__":
    main()
