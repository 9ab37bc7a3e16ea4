# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The head serves the model: /v1/models answers 200 where the plan says the head listens (its api.url, from
container.api.bind), asked from the head itself, until the ranks have loaded (60 tries, 2 s apart)."""

from __future__ import annotations

import time

testinfra_hosts = ["ansible://dgxspark_head"]

TRIES = 60
DELAY_S = 2
# the node's Python 3 asks, as the uri module did on the head: prints the HTTP status, fails on an error status
ASK = (
    "import sys, urllib.request\n"
    "with urllib.request.urlopen(sys.argv[1], timeout=30) as answer:\n"
    "    print(answer.status)\n"
)


def test_head_serves_v1_models(host, record):
    url = record("vllm_container_plan.json")["api"]["url"] + "/v1/models"
    asked = host.run("python3 -c %s %s", ASK, url)
    for _attempt in range(TRIES - 1):
        if asked.rc == 0 and asked.stdout.strip() == "200":
            break
        time.sleep(DELAY_S)
        asked = host.run("python3 -c %s %s", ASK, url)
    assert asked.rc == 0 and asked.stdout.strip() == "200", f"{url}: {asked.stdout.strip()} {asked.stderr.strip()}"
