# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The OpenAI-compatible API of a single-node engine, checked with the official `openai` client."""

from __future__ import annotations

import re
import threading
import time

import openai
import pytest
from engine_helpers import Engine, free_port, http_get, http_status, wait_healthy

MODEL = "sim-model"
MAX_MODEL_LEN = 4096
MAX_NUM_SEQS = 2


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    port = free_port()
    engine = Engine(
        [
            "/models/sim",
            "--served-model-name",
            MODEL,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--max-model-len",
            str(MAX_MODEL_LEN),
            "--max-num-seqs",
            str(MAX_NUM_SEQS),
        ],
        {"SIM_ENGINE_TIME_SCALE": "0.2"},
        tmp_path_factory.mktemp("api"),
        "api",
    )
    try:
        wait_healthy(port, engine)
        yield port, engine
    finally:
        engine.term()
        engine.wait(10)
        engine.close()


@pytest.fixture
def client(api):
    port = api[0]
    return openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=30)


def test_health_and_models(api, client):
    port = api[0]
    assert http_status(port, "/health") == 200
    models = client.models.list().data
    assert [m.id for m in models] == [MODEL]
    assert models[0].model_extra["max_model_len"] == MAX_MODEL_LEN


def test_chat_counts_from_1_to_10(client):
    r = client.chat.completions.create(
        model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "Count from 1 to 10."}]
    )
    assert r.choices[0].message.content == "1, 2, 3, 4, 5, 6, 7, 8, 9, 10"
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.completion_tokens == 10
    assert r.usage.prompt_tokens == -(-len("user: Count from 1 to 10.\nassistant:") // 4)


def test_chat_stream_with_usage(client):
    stream = client.chat.completions.create(
        model=MODEL,
        max_tokens=20,
        stream=True,
        stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "Tell me about the cluster."}],
    )
    chunks = list(stream)
    content = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert len(content) == 20 and finishes == ["length"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 20
    assert "".join(content).startswith("This answer comes from the stand-in engine")


def test_completions_with_and_without_stream(client):
    r = client.completions.create(model=MODEL, prompt="Count from 3 to 5", max_tokens=16)
    assert r.choices[0].text == "3, 4, 5" and r.usage.completion_tokens == 3
    r = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=7)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 7
    stream = client.completions.create(
        model=MODEL, prompt="Count from 1 to 4", max_tokens=2, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    assert "".join(c.choices[0].text for c in chunks if c.choices) == "1, 2,"
    assert chunks[-1].usage.completion_tokens == 2 and chunks[-2].choices[0].finish_reason == "length"


def test_needle_in_a_haystack(client):
    filler = "The grass is green and the sky is blue on an ordinary afternoon. "
    haystack = filler * 80 + "The secret passphrase is indigo-walrus-7. " + filler * 80
    r = client.chat.completions.create(
        model=MODEL,
        max_tokens=30,
        messages=[{"role": "user", "content": haystack + "\nWhat is the secret passphrase?"}],
    )
    assert "indigo-walrus-7" in r.choices[0].message.content
    assert r.usage.prompt_tokens > 2500


def test_too_long_prompt_is_a_400_with_vllms_wording(client):
    prompt = "word " * 4000  # 20000 characters = 5000 tokens (4 characters a token)
    with pytest.raises(openai.BadRequestError) as exc:
        client.completions.create(model=MODEL, prompt=prompt, max_tokens=5)
    assert exc.value.status_code == 400
    assert exc.value.body["message"] == (
        "This model's maximum context length is 4096 tokens. However, your prompt contains 5000 input tokens, "
        "which exceeds this limit even without any output tokens. Please reduce the length of the input prompt."
    )
    assert exc.value.type == "BadRequestError" and exc.value.param == "input_tokens"
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="other", prompt="hi", max_tokens=5)


def _gauges(port: int) -> tuple[float, float]:
    text = http_get(port, "/metrics")
    running = float(re.search(r"^vllm:num_requests_running\{[^}]*\} (\S+)$", text, re.M).group(1))
    waiting = float(re.search(r"^vllm:num_requests_waiting\{[^}]*\} (\S+)$", text, re.M).group(1))
    return running, waiting


def test_max_num_seqs_queues_the_rest_visibly_in_metrics(api, client):
    port = api[0]
    results: list[int] = []

    def one():
        r = client.completions.create(model=MODEL, prompt="Write a story.", max_tokens=60)
        results.append(r.usage.completion_tokens)

    threads = [threading.Thread(target=one) for _i in range(5)]
    for t in threads:
        t.start()
    seen = []
    while any(t.is_alive() for t in threads):
        seen.append(_gauges(port))
        time.sleep(0.02)
    for t in threads:
        t.join()
    assert results == [60] * 5
    assert max(r for r, _w in seen) == MAX_NUM_SEQS
    assert max(w for _r, w in seen) >= 2  # 3 expected; 2 tolerates a thread that starts late
    assert all(r + w <= 5 for r, w in seen)
    assert _gauges(port) == (0.0, 0.0)
