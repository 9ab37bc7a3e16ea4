# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_facts' ``weights`` section: the manifest, its cache keyed by size and mtime, and the hash budget."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import stat
from collections.abc import Callable
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils import _weights_manifest as manifest
from ansible_collections.dgxspark.cluster.plugins.module_utils._node_facts import (
    DEFAULT_SECTIONS,
    CommandResult,
    Options,
    gather,
)
from ansible_collections.dgxspark.cluster.plugins.module_utils._weights_manifest import cache_file, weights_facts

# A model directory as DeepSeek-V4.1-Flash's is laid out (config, index, tokenizer, shards), at toy sizes:
# the real one holds 48 shards of about 10 GiB (the TP8 port seed 002 adapts checks for
# model-00048-of-00048.safetensors), which the budget tests stand in for with a clock.
LAYOUT = {
    "config.json": b'{"architectures": ["DeepseekV41ForCausalLM"], "num_hidden_layers": 43}\n',
    "model.safetensors.index.json": b'{"weight_map": {"embed.weight": "model-00001-of-00003.safetensors"}}\n',
    "tokenizer.json": b'{"version": "1.0"}\n' * 50,
    "model-00001-of-00003.safetensors": b"\x01" * 300_000,
    "model-00002-of-00003.safetensors": b"\x02" * 200_000,
    "model-00003-of-00003.safetensors": b"\x03" * 100_000,
    "inference/encoding.py": b"def encode(text):\n    return text\n",
}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def model(tmp_path: pathlib.Path) -> pathlib.Path:
    root = tmp_path / "models" / "DeepSeek-V4.1-Flash"
    for name, data in LAYOUT.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    # what download tools leave beside the weights, different on every node: never in the manifest
    (root / ".cache" / "huggingface" / "download").mkdir(parents=True)
    (root / ".cache" / "huggingface" / "download" / "config.json.metadata").write_text("1733000000.123\n")
    (root / ".model-00003-of-00003.safetensors.Xa81Qz").write_bytes(b"\x03" * 10)  # rsync's copy in progress
    return root


class Ticks:
    """A monotonic clock that advances ``step`` seconds every time it is read."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_the_manifest_names_every_file_with_its_size_and_sha256(model: pathlib.Path, tmp_path: pathlib.Path) -> None:
    facts, problems = weights_facts(str(model), str(tmp_path / "cache"))
    assert problems == []
    assert facts["files"] == {name: {"size": len(data), "sha256": sha256(data)} for name, data in LAYOUT.items()}
    assert facts["file_count"] == len(LAYOUT) and facts["total_bytes"] == sum(len(d) for d in LAYOUT.values())
    assert facts["complete"] is True and facts["not_hashed"] == 0 and facts["truncated"] is False
    assert facts["hashed"]["files"] == len(LAYOUT) and facts["from_cache"] == 0
    assert facts["root"] == str(model) and facts["exists"] is True and facts["error"] is None
    json.dumps(facts)


def test_the_cache_is_private_and_a_second_run_hashes_nothing(model: pathlib.Path, tmp_path: pathlib.Path) -> None:
    cache_dir = tmp_path / "state" / "dgxspark-cluster"
    first = weights_facts(str(model), str(cache_dir))[0]
    path = pathlib.Path(first["cache"]["path"])
    assert path == pathlib.Path(cache_file(str(cache_dir), str(model)))
    assert first["cache"] == {"path": str(path), "read": False, "written": True, "error": None}
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    written = path.stat().st_mtime_ns

    second, problems = weights_facts(str(model), str(cache_dir))
    assert problems == []
    assert second["hashed"] == {"files": 0, "bytes": 0, "seconds": second["hashed"]["seconds"]}
    assert second["from_cache"] == len(LAYOUT) and second["files"] == first["files"]
    assert second["cache"]["read"] is True and second["cache"]["written"] is False
    assert path.stat().st_mtime_ns == written  # nothing changed: the cache is not rewritten


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda p: p.write_bytes(b"\x09" * 100_000), id="same size, new mtime"),
        pytest.param(lambda p: p.write_bytes(b"\x03" * 100_001), id="new size"),
    ],
)
def test_a_file_whose_size_or_mtime_changed_is_hashed_again(
    model: pathlib.Path, tmp_path: pathlib.Path, change: Callable[[pathlib.Path], Any]
) -> None:
    weights_facts(str(model), str(tmp_path / "cache"))
    shard = model / "model-00003-of-00003.safetensors"
    before = shard.stat().st_mtime_ns
    change(shard)
    os.utime(shard, ns=(before + 1_000_000_000, before + 1_000_000_000))
    again = weights_facts(str(model), str(tmp_path / "cache"))[0]
    assert again["hashed"]["files"] == 1 and again["from_cache"] == len(LAYOUT) - 1
    assert again["files"]["model-00003-of-00003.safetensors"]["sha256"] == sha256(shard.read_bytes())
    assert again["cache"]["written"] is True


def test_the_budget_hashes_the_smallest_files_first_and_the_next_run_goes_on(
    model: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    # a reading before each file and each 8 MiB chunk, and one at its end: three readings, 1.5 s, a small file;
    # a budget of 9 s hashes the five smallest files and stops inside the sixth
    cache = str(tmp_path / "cache")
    first = weights_facts(str(model), cache, budget_seconds=9, clock=Ticks(0.5))[0]
    hashed = sorted(name for name, entry in first["files"].items() if entry["sha256"])
    assert hashed == [
        "config.json",
        "inference/encoding.py",
        "model-00003-of-00003.safetensors",
        "model.safetensors.index.json",
        "tokenizer.json",
    ]
    assert first["complete"] is False and first["not_hashed"] == 2
    assert all(entry["size"] == len(LAYOUT[name]) for name, entry in first["files"].items())
    second = weights_facts(str(model), cache, budget_seconds=9, clock=Ticks(0.5))[0]
    assert second["from_cache"] == 5 and second["hashed"]["files"] == 2 and second["complete"] is True


def test_a_budget_of_zero_hashes_nothing_new_but_lists_every_size(model: pathlib.Path, tmp_path: pathlib.Path) -> None:
    facts, problems = weights_facts(str(model), str(tmp_path / "cache"), budget_seconds=0)
    assert problems == [] and facts["hashed"]["files"] == 0
    assert facts["files"]["config.json"] == {"size": len(LAYOUT["config.json"]), "sha256": None}
    assert facts["not_hashed"] == len(LAYOUT) and facts["complete"] is False and facts["budget_seconds"] == 0


def test_a_file_stopped_halfway_by_the_budget_is_not_hashed(tmp_path: pathlib.Path) -> None:
    big = tmp_path / "w" / "model.safetensors"
    big.parent.mkdir()
    big.write_bytes(b"\x00" * (3 * manifest.CHUNK_BYTES))
    facts = weights_facts(str(big.parent), str(tmp_path / "cache"), budget_seconds=3, clock=Ticks(1))[0]
    assert facts["files"]["model.safetensors"]["sha256"] is None and facts["hashed"]["files"] == 0


def test_check_mode_reads_the_cache_and_never_writes_it(model: pathlib.Path, tmp_path: pathlib.Path) -> None:
    cache = tmp_path / "cache"
    facts = weights_facts(str(model), str(cache), write_cache=False)[0]
    assert facts["complete"] is True and facts["cache"]["written"] is False and not cache.exists()
    weights_facts(str(model), str(cache))
    again = weights_facts(str(model), str(cache), write_cache=False)[0]
    assert again["from_cache"] == len(LAYOUT) and again["hashed"]["files"] == 0


def test_no_cache_dir_means_no_cache(model: pathlib.Path) -> None:
    facts, problems = weights_facts(str(model), "")
    assert problems == [] and facts["cache"] == {"path": None, "read": False, "written": False, "error": None}


@pytest.mark.parametrize(
    "spoil,error",
    [
        (lambda p: p.chmod(0o620), "owned by uid"),
        (lambda p: p.chmod(0o606), "owned by uid"),
        (lambda p: (p.rename(p.with_suffix(".real")), p.symlink_to(p.with_suffix(".real"))), "not a regular file"),
        (lambda p: p.write_text('{"version": 1, "root": "/elsewhere", "files": {}}'), "not a version 1 cache"),
        (lambda p: p.write_text("{"), "could not read"),
    ],
    ids=["group-writable", "writable by others", "a symlink", "another directory's", "not JSON"],
)
def test_a_cache_that_cannot_be_trusted_is_ignored_and_reported(
    model: pathlib.Path, tmp_path: pathlib.Path, spoil: Callable[[pathlib.Path], Any], error: str
) -> None:
    cache = tmp_path / "cache"
    first = weights_facts(str(model), str(cache))[0]
    path = pathlib.Path(first["cache"]["path"])
    data = json.loads(path.read_text())
    data["files"]["config.json"]["sha256"] = "0" * 64  # what a cache that hides a change would say
    path.write_text(json.dumps(data))
    spoil(path)
    facts, problems = weights_facts(str(model), str(cache), write_cache=False)
    assert error in facts["cache"]["error"] and facts["cache"]["read"] is False
    assert facts["files"]["config.json"]["sha256"] == sha256(LAYOUT["config.json"])
    assert [source for source, _message in problems] == [str(path)]
    assert problems[0][1].startswith("weights hash cache ")


def test_a_cache_that_cannot_be_written_is_a_problem_not_a_failure(model: pathlib.Path, tmp_path: pathlib.Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    facts, problems = weights_facts(str(model), str(blocker / "cache"))
    assert facts["complete"] is True and facts["cache"]["written"] is False
    assert facts["cache"]["error"].startswith("could not write: ")
    assert problems == [(cache_file(str(blocker / "cache"), str(model)), problems[0][1])]


def test_more_files_than_a_model_directory_holds_stops_the_walk(model: pathlib.Path, tmp_path: pathlib.Path) -> None:
    facts = weights_facts(str(model), str(tmp_path / "cache"), max_files=3)[0]
    assert facts["truncated"] is True and facts["file_count"] == 3 and facts["hashed"]["files"] == 0
    assert facts["error"] == f"more than 3 files under {model}: not a model directory? Nothing was hashed"
    assert facts["cache"]["written"] is False


def test_symlinks_files_followed_directories_not(model: pathlib.Path, tmp_path: pathlib.Path) -> None:
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    (blobs / "abc").write_bytes(b"generation config\n")
    (model / "generation_config.json").symlink_to(blobs / "abc")
    (model / "extra").symlink_to(blobs, target_is_directory=True)
    (model / "dangling.json").symlink_to(tmp_path / "gone")
    facts, problems = weights_facts(str(model), str(tmp_path / "cache"))
    assert facts["files"]["generation_config.json"]["sha256"] == sha256(b"generation config\n")
    assert not any(name.startswith("extra/") for name in facts["files"]) and "dangling.json" not in facts["files"]
    assert sorted(problems) == [
        (str(model / "dangling.json"), "a symlink whose target is missing"),
        (str(model / "extra"), "a symlink to a directory: not followed, its files are not listed"),
    ]


def test_a_path_that_is_one_file_or_none(tmp_path: pathlib.Path) -> None:
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    facts = weights_facts(str(gguf), "")[0]
    assert facts["files"] == {"model.gguf": {"size": 4, "sha256": sha256(b"GGUF")}}
    missing, problems = weights_facts(str(tmp_path / "absent"), "")
    assert missing["exists"] is False and missing["files"] == {} and problems == []
    assert weights_facts(None) == ({"path": None}, [])


def test_a_file_that_changes_while_it_is_hashed_is_not_hashed(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "w"
    root.mkdir()
    shard = root / "model.safetensors"
    shard.write_bytes(b"\x01" * 1000)

    readings: list[float] = []

    def clock() -> float:  # the third reading is the hash's first: the copy goes on while the file is read
        readings.append(0.0)
        if len(readings) == 3:
            with shard.open("ab") as handle:
                handle.write(b"\x01")
        return 0.0

    facts, problems = weights_facts(str(root), "", clock=clock)
    assert facts["files"]["model.safetensors"]["sha256"] is None
    assert problems == [(str(shard), "changed while being hashed: not hashed")]


def test_node_facts_gathers_weights_only_when_named(model: pathlib.Path, tmp_path: pathlib.Path) -> None:
    assert "weights" not in DEFAULT_SECTIONS

    def no_tools(argv: list[str]) -> CommandResult:
        return CommandResult(1, "", "no tools here")

    options = Options(
        sections=("weights",),
        weights_path=str(model),
        weights_cache_dir=str(tmp_path / "cache"),
        weights_hash_seconds=60,
    )
    node = gather(options, no_tools)
    assert list(node) == ["weights", "sections", "problems", "elapsed_ms"]
    assert node["weights"]["complete"] is True and node["problems"] == []
    (model / "broken.json").symlink_to(tmp_path / "gone")
    node = gather(options, no_tools)
    assert node["problems"] == [
        {"section": "weights", "source": str(model / "broken.json"), "message": "a symlink whose target is missing"}
    ]


def test_a_directory_that_cannot_be_listed_is_no_manifest(
    model: pathlib.Path, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(top: str, onerror: Callable[[OSError], None]) -> Any:
        onerror(PermissionError(13, "Permission denied", top))
        return iter(())

    monkeypatch.setattr(manifest.os, "walk", refused)
    facts, problems = weights_facts(str(model), str(tmp_path / "cache"))
    assert facts["error"] == f"cannot list {model}: Permission denied" and facts["files"] == {}
    assert problems == [(str(model), "Permission denied")] and not (tmp_path / "cache").exists()
