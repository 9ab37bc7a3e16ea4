# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A sparkrun recipe read as sparkrun 0.4.2 reads it (``sparkrun/core/recipe.py``), without sparkrun.

What is read, in sparkrun's own terms:

- ``recipe_version`` "1" or "2" (default "2"); the name is the file's stem (a ``name:`` key is ignored, as sparkrun
  ignores it); ``include:`` needs sparkrun's registries and is refused.
- ``mode`` (solo, cluster, auto), ``min_nodes`` (default 1), ``max_nodes``, ``cluster_only`` (at least 2 nodes),
  ``solo_only`` (one node).
- ``container`` (``image`` is taken when there is no ``container``; sparkrun 0.4.2 itself has no ``image`` key).
- The config chain a ``command`` template is rendered from, highest first: sparkrun's ``-o`` options, the chosen
  ``variants`` entry (recipe repositories use it; sparkrun 0.4.2 itself ignores the key), ``defaults``, then
  ``model``, ``model_revision`` (only when set) and ``resolved_model_path`` (the model). String defaults written with
  v1's doubled braces are collapsed.
- The ``command`` template: ``{key}`` placeholders filled from the chain until the text stops changing (at most 10
  passes); literal braces are kept, and a template that uses ``{{``/``}}`` escapes has them collapsed to one brace;
  a backslash line continuation broken by trailing blanks is repaired. A placeholder with no value stays as written.
- The runtime: ``runtime`` as given; without it, from the command (``vllm serve``: vllm; sglang, ``llama-server``,
  trtllm); a vLLM recipe is ``vllm-ray`` when ``distributed_executor_backend`` is ray (in the chain or the
  command), else ``vllm-distributed``.
- A ``served_model_name`` in the chain is appended as ``--served-model-name`` when the command has none (sparkrun's
  ``_augment_served_model_name``).
- The parallelism (``tensor_parallel``, ``pipeline_parallel``, ``data_parallel``, ``expert_parallel``,
  ``context_parallel``) from the chain, each 1 when absent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

import yaml

RECIPE_VERSIONS = ("1", "2")
VLLM_RUNTIMES = ("vllm", "vllm-distributed", "vllm-ray", "eugr-vllm")
PARALLELISM = ("tensor_parallel", "pipeline_parallel", "data_parallel", "expert_parallel", "context_parallel")

_PLACEHOLDER = re.compile(r"\{[^{}]*\}")
_KEY = re.compile(r"\{[A-Za-z_][A-Za-z0-9_.-]*\}")
_MAX_PASSES = 10
_LEFT, _RIGHT = "\x00L\x00", "\x00R\x00"
_BROKEN_CONTINUATION = re.compile(r"\\[ \t]+\n")
_CMD_VLLM = re.compile(r"^vllm\s+serve\b")
_CMD_SGLANG = re.compile(r"^(?:sglang\s+serve|python3?\s+-m\s+sglang\.launch_server)\b")
_CMD_LLAMA_CPP = re.compile(r"^llama-server\b")
_CMD_TRTLLM = re.compile(r"^(?:trtllm-serve|mpirun\b.*trtllm)")
_RAY_BACKEND = re.compile(r"--distributed-executor-backend\s+ray\b")


class RecipeError(ValueError):
    """The recipe cannot be read; ``problems`` says every reason."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = list(problems)
        super().__init__(f"{source}: " + "; ".join(self.problems))


@dataclass(frozen=True)
class Recipe:
    """A recipe with its config chain resolved and its command rendered."""

    source: str
    name: str
    version: str
    data: Mapping[str, Any]
    """The recipe's keys as written."""
    runtime: str
    model: str
    container: str
    container_key: str
    """Where the image came from: ``container`` or ``image``."""
    mode: str
    min_nodes: int
    max_nodes: int | None
    chain: dict[str, Any]
    """The config chain, flattened: options over the variant over defaults over model."""
    chain_origin: dict[str, str]
    """Each chain key's origin: ``-o``, ``variants.<name>``, ``defaults`` or ``model``."""
    env: dict[str, str]
    template: str | None
    rendered: str | None
    unresolved: tuple[str, ...]
    """Placeholders left in the rendered command (no value in the chain)."""
    used: frozenset[str]
    """Chain keys the command template used."""
    variant: str | None
    variants: tuple[str, ...]
    notes: list[str] = field(default_factory=list)
    """How the reading went where a reader should know (an ``image`` key, a served name appended...)."""

    def parallel(self, key: str) -> int | None:
        """A parallelism value of the chain as an int; None when absent."""
        value = self.chain.get(key)
        if value is None:
            return None
        return int(value)


def _collapse(value: Any) -> Any:
    return value.replace("{{", "{").replace("}}", "}") if isinstance(value, str) and "{{" in value else value


def _mask(text: str, escapes: bool) -> str:
    """Hide every brace that is not part of a ``{key}`` placeholder (sparkrun's mask_non_placeholder_braces)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "{":
            if text.startswith("{{", i):
                out.append(_LEFT if escapes else _LEFT * 2)
                i += 2
                continue
            match = _PLACEHOLDER.match(text, i)
            if match:
                out.append(match.group())
                i = match.end()
                continue
            out.append(_LEFT)
        elif char == "}":
            if text.startswith("}}", i):
                out.append(_RIGHT if escapes else _RIGHT * 2)
                i += 2
                continue
            out.append(_RIGHT)
        else:
            out.append(char)
        i += 1
    return "".join(out)


def render(template: str, chain: Mapping[str, Any]) -> tuple[str, tuple[str, ...], frozenset[str]]:
    """The template rendered from ``chain`` as sparkrun renders a command, the placeholders left unfilled, and the
    chain keys it used."""
    text = template.strip()
    masked = _mask(text, escapes="{{" in text)
    used: set[str] = set()

    def fill(match: re.Match[str]) -> str:
        key = match.group()[1:-1]
        value = chain.get(key)
        if value is None:
            return match.group()
        used.add(key)
        return str(value)

    for _pass in range(_MAX_PASSES):
        after = _PLACEHOLDER.sub(fill, masked)
        if after == masked:
            break
        masked = after
    # a span such as {"a":1} is a placeholder to sparkrun too, left as written when the chain has no such key: only
    # one that names a key is a placeholder left unfilled
    unresolved = tuple(dict.fromkeys(m.group() for m in _PLACEHOLDER.finditer(masked) if _KEY.fullmatch(m.group())))
    rendered = masked.replace(_LEFT, "{").replace(_RIGHT, "}")
    return _BROKEN_CONTINUATION.sub("\\\n", rendered), unresolved, frozenset(used)


def _runtime(data: Mapping[str, Any], chain: Mapping[str, Any], command: str) -> str:
    runtime = str(data.get("runtime") or "")
    cmd = command.strip()
    if not runtime and cmd:
        if _CMD_SGLANG.match(cmd):
            return "sglang"
        if _CMD_LLAMA_CPP.match(cmd):
            return "llama-cpp"
        if _CMD_TRTLLM.match(cmd):
            return "trtllm"
    if runtime in ("vllm", ""):
        if str(chain.get("distributed_executor_backend", "")).lower() == "ray" or _RAY_BACKEND.search(cmd):
            return "vllm-ray"
        return "vllm-distributed"
    return runtime


def _int(value: Any, where: str, problems: list[str]) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        problems.append(f"{where} must be an integer, not {value!r}")
        return None


def load_recipe(
    text: str,
    source: str,
    variant: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> Recipe:
    """Read a recipe's YAML text; ``variant`` picks a ``variants`` entry, ``options`` are sparkrun's ``-o key=value``.
    RecipeError with every reason when it cannot be read."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise RecipeError(source, [f"not YAML{where}: {getattr(error, 'problem', None) or error}"]) from None
    if not isinstance(data, dict):
        raise RecipeError(source, [f"a recipe is a YAML mapping, not {type(data).__name__}"])
    problems: list[str] = []
    if "include" in data:
        problems.append(
            f"include: {data['include']!r} takes its base from sparkrun's registries, which this import does not read: "
            "write the recipe out whole (its base's keys and its own) and import that"
        )
    version = str(data.get("recipe_version", "2"))
    if version not in RECIPE_VERSIONS:
        problems.append(f"recipe_version {version!r}: sparkrun 0.4.2 reads recipe_version 1 and 2")
    command = data.get("command")
    if command is not None and not isinstance(command, str):
        problems.append(f"command must be a string (a template), not {type(command).__name__}")
    for key in ("defaults", "env", "metadata", "variants", "executor_config"):
        if data.get(key) is not None and not isinstance(data.get(key), dict):
            problems.append(f"{key} must be a mapping, not {type(data.get(key)).__name__}")
    if options is not None and not isinstance(options, Mapping):
        problems.append(f"the options (sparkrun's -o) must be a mapping of key to value, not {options!r}")
    if problems:
        raise RecipeError(source, problems)

    notes: list[str] = []
    container_key = "container"
    container = str(data.get("container") or "")
    if not container and data.get("image"):
        container, container_key = str(data["image"]), "image"
        notes.append("image: taken as the container (sparkrun 0.4.2 reads container:)")
    model = str(data.get("model") or "")

    mode = str(data.get("mode", "auto"))
    min_nodes = _int(data.get("min_nodes", 1), "min_nodes", problems) or 1
    max_nodes = _int(data.get("max_nodes"), "max_nodes", problems)
    if mode == "solo":
        min_nodes = max_nodes = 1
    elif mode == "auto" and min_nodes > 1:
        mode = "cluster"
    elif mode == "auto" and max_nodes == 1:
        mode = "solo"
    if data.get("cluster_only"):
        min_nodes, mode = max(min_nodes, 2), "cluster"
    if data.get("solo_only"):
        max_nodes, mode = 1, "solo"

    variants = data.get("variants") or {}
    chain: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for key, value in (data.get("defaults") or {}).items():
        chain[str(key)], origin[str(key)] = _collapse(value), "defaults"
    if variant is not None:
        if variant not in variants:
            offered = ", ".join(sorted(map(str, variants))) or "none"
            problems.append(f"no variant {variant!r} in variants (the recipe offers: {offered})")
        elif not isinstance(variants[variant], dict):
            problems.append(f"variants.{variant} must be a mapping of settings, not {variants[variant]!r}")
        else:
            for key, value in variants[variant].items():
                if key == "description":
                    continue
                chain[str(key)], origin[str(key)] = _collapse(value), f"variants.{variant}"
    for key, value in (options or {}).items():
        chain[str(key)], origin[str(key)] = value, "-o"
    for key, value in (
        ("model", model),
        ("model_revision", data.get("model_revision")),
        ("resolved_model_path", model),
    ):
        if value and key not in chain:
            chain[key], origin[key] = value, "model"
    for key in PARALLELISM:
        _int(chain.get(key), f"{origin.get(key, 'defaults')}.{key}", problems)
    if problems:
        raise RecipeError(source, problems)

    rendered = unresolved = None
    used: frozenset[str] = frozenset()
    if isinstance(command, str) and command.strip():
        rendered, unresolved, used = render(command, chain)
        served = chain.get("served_model_name")
        if served is not None and not re.search(r"(?<!\S)--served-model-name(?=[=\s]|$)", rendered):
            rendered = rendered.rstrip().rstrip("\\").rstrip() + f" --served-model-name {served}"
            used = used | {"served_model_name"}
            notes.append(f"--served-model-name {served}: appended from {origin['served_model_name']}, as sparkrun does")
    env = {str(k): ("" if v is None else str(v)) for k, v in (data.get("env") or {}).items()}
    return Recipe(
        source=source,
        name=PurePath(source).stem if source else "unnamed",
        version=version,
        data=data,
        runtime=_runtime(data, chain, rendered or ""),
        model=model,
        container=container,
        container_key=container_key,
        mode=mode,
        min_nodes=min_nodes,
        max_nodes=max_nodes,
        chain=chain,
        chain_origin=origin,
        env=env,
        template=command if isinstance(command, str) else None,
        rendered=rendered,
        unresolved=tuple(unresolved or ()),
        used=used,
        variant=variant,
        variants=tuple(str(v) for v in variants),
        notes=notes,
    )
