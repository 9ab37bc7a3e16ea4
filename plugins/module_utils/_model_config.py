# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_facts' ``weights`` section, the model's ``config.json``: only the keys a KV-cache size depends on.

The preflight works out on the controller what one token costs in the KV cache (``plugin_utils/plan/kv.py``) from the
config.json of the weights the head will load. The node sends only :data:`KV_KEYS` (and the same keys of a
multimodal config's ``text_config``), never the whole file:

- the weights path may be the model's own directory (``config.json`` at its top) or a directory of models
  (spark8's ``/models`` holds ``DeepSeek-V4.1-Flash/``), so ``<root>/config.json`` and ``<root>/<dir>/config.json``
  are read, for the first :data:`MAX_DIRS` subdirectories (sorted; names starting with ``.`` are a download
  tool's state and are left out); each is named by its path relative to the root;
- a file over :data:`MAX_CONFIG_BYTES` is not read (a model's config.json is a few KiB);
- a value is returned when it is a JSON scalar (a string of at most :data:`MAX_TEXT` characters), a list of at
  most :data:`MAX_ITEMS` scalars (``layer_types``, ``compress_ratios``: one entry per layer) or a mapping of at
  most :data:`MAX_ITEMS` such values (``compress_rates``, ``linear_attn_config``); a key whose value is anything
  else is named in ``skipped``, without its value;
- a file that cannot be read, or is not a JSON object, is reported (``error``, and a problem for node_facts'
  ``problems``). A missing config.json is not a problem: the preflight says what it looked for.

No Ansible imports; target Pythons 3.8+.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, Tuple

CONFIG_NAME = "config.json"
MAX_CONFIG_BYTES = 1024 * 1024
MAX_DIRS = 64
MAX_ITEMS = 4096
MAX_TEXT = 256
NESTED = "text_config"
# What KV bytes per token depend on (plugin_utils/plan/kv.py), what names the model, and what marks attention the
# formula does not model (the preflight names those and asks for a measured cost instead).
# The model's own KV figures, which a profile's model_config may state too (the preflight's kv-fit compares them).
SHAPE_KEYS: tuple[str, ...] = (
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "hidden_size",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "torch_dtype",
    "sliding_window",
    "layer_types",
)
KV_KEYS: tuple[str, ...] = (
    "architectures",
    "model_type",
    *SHAPE_KEYS,
    "dtype",
    "max_position_embeddings",
    # not modelled: DeepSeek-V4 compressed attention, linear attention and state-space layers
    "compress_ratios",
    "compress_rates",
    "attn_type_list",
    "layers_block_type",
    "hybrid_override_pattern",
    "linear_attn_config",
)

Problem = Tuple[str, str]
"""(source, message): for node_facts' ``problems``."""
Entry = Dict[str, Any]


def _scalar(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, str) and len(value) <= MAX_TEXT


def _small_list(value: Any) -> bool:
    return isinstance(value, list) and len(value) <= MAX_ITEMS and all(_scalar(item) for item in value)


def _bounded(value: Any) -> bool:
    """A value small and plain enough to return: a scalar, a list of scalars, or a mapping of those."""
    if _scalar(value) or _small_list(value):
        return True
    return (
        isinstance(value, dict)
        and len(value) <= MAX_ITEMS
        and all(isinstance(key, str) and len(key) <= MAX_TEXT for key in value)
        and all(_scalar(item) or _small_list(item) for item in value.values())
    )


def kv_keys(config: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The :data:`KV_KEYS` of a parsed config.json (and of its ``text_config``), and the keys left out because
    their value is not small and plain (named ``text_config.<key>`` inside it)."""
    kept: dict[str, Any] = {}
    skipped: list[str] = []
    for key in KV_KEYS:
        if key in config:
            if _bounded(config[key]):
                kept[key] = config[key]
            else:
                skipped.append(key)
    inner = config.get(NESTED)
    if isinstance(inner, dict):
        nested, nested_skipped = kv_keys({k: v for k, v in inner.items() if k != NESTED})
        kept[NESTED] = nested
        skipped += [f"{NESTED}.{key}" for key in nested_skipped]
    elif NESTED in config and inner is not None:
        skipped.append(NESTED)
    return kept, skipped


def read_config(path: str) -> tuple[Entry, list[Problem]]:
    """One config.json: ``size``, ``keys`` (:func:`kv_keys`), ``skipped`` and ``error`` (why ``keys`` is null)."""
    entry: Entry = {"size": None, "keys": None, "skipped": [], "error": None}
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            entry["size"] = size
            if size > MAX_CONFIG_BYTES:
                entry["error"] = f"{size} bytes, more than {MAX_CONFIG_BYTES}: not read (a config.json is a few KiB)"
                return entry, [(path, entry["error"])]
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as error:
        entry["error"] = f"could not read: {error.strerror or error}"
        return entry, [(path, entry["error"])]
    if len(raw) > MAX_CONFIG_BYTES:  # grew since the stat
        entry["error"] = f"more than {MAX_CONFIG_BYTES} bytes: not read (a config.json is a few KiB)"
        return entry, [(path, entry["error"])]
    try:
        config = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as error:
        entry["error"] = f"not UTF-8 text: {error.reason} at byte {error.start}"
        return entry, [(path, entry["error"])]
    except ValueError as error:
        entry["error"] = f"not JSON: {error}"
        return entry, [(path, entry["error"])]
    if not isinstance(config, dict):
        entry["error"] = f"not a JSON object (a {type(config).__name__}): not a model's config.json"
        return entry, [(path, entry["error"])]
    entry["keys"], entry["skipped"] = kv_keys(config)
    return entry, []


def model_configs(root: str, max_dirs: int = MAX_DIRS) -> tuple[dict[str, Entry], list[Problem]]:
    """Every config.json at ``root`` and one directory below it, by path relative to ``root``, and the problems
    met. ``root`` is the weights directory's real path; a file, or a path that is not there, has none."""
    found: dict[str, Entry] = {}
    problems: list[Problem] = []
    if not os.path.isdir(root):
        return found, problems
    candidates = [CONFIG_NAME]
    try:
        names = sorted(name for name in os.listdir(root) if not name.startswith("."))
    except OSError as error:
        return found, [(root, f"could not list it for config.json: {error.strerror or error}")]
    directories = [name for name in names if os.path.isdir(os.path.join(root, name))]
    if len(directories) > max_dirs:
        problems.append(
            (
                root,
                f"{len(directories)} directories: config.json looked for in the first {max_dirs} only "
                "(sorted by name); point host.weights_path at the model's own directory",
            )
        )
    candidates += [f"{name}/{CONFIG_NAME}" for name in directories[:max_dirs]]
    for relative in candidates:
        path = os.path.join(root, relative)
        if not os.path.isfile(path):
            continue
        entry, met = read_config(path)
        found[relative] = entry
        problems += met
    return found, problems
