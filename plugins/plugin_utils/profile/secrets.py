# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Secrets go to the node as files: the profile's ``container.secrets``, and the refusal of secrets given inline.

``container.secrets`` maps a name to the absolute path of a file that every node holds (root's, 0600). The plan
binds each file read-only into every rank at ``/run/secrets/<name>`` (a ``--mount`` read through the same table
as the profile's own ``docker run`` options) and, for a consumer that reads its secret from a file a variable
names, sets only that variable, to the path: ``hf_token`` sets ``HF_TOKEN_PATH`` (huggingface_hub reads the
token from the file it names). Nothing on the controller ever reads such a file; the preflight asks each node
for its type, owner and mode (node_facts' ``secrets`` section: stat only).

A secret given inline would be rendered into the plan's argv, the ``serving_profile`` result, the
``docker_container`` parameters and diff, and ``docker inspect``, so it is refused, and the problem that says
so never repeats the value: an environment variable whose name looks secret (:func:`secret_env_name`: the
collection's one rule, ``module_utils/_secret_names.py``, less a variable that names a file), a value that
looks like a Hugging Face token wherever it is, a ``-e``/``--env`` option of either kind, and the ``vllm serve``
flags that take a secret as their value (:data:`SECRET_FLAGS`). There is no waiver: a waiver would put the
secret in argv all the same.

No Ansible imports: plain functions over strings, shared by the profile's checks, the plan and the problems.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ansible_collections.dgxspark.cluster.plugins.module_utils._secret_names import is_secret_name

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Collector

FIELD = "container.secrets"
SECRETS_DIR = "/run/secrets"
# A secret's name: the file's name in the rank (/run/secrets/<name>); no path separator, no leading dot.
SECRET_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}"
SECRET_NAME_HINT = "a name such as hf_token (letters, digits, _ . -, not starting with . or -)"
# A secret's file on the node: absolute, no '.' or '..' part, and nothing a shell, YAML, Docker's --mount (',')
# or --volume (':') would read otherwise: letters, digits and _ . @ + - between slashes.
SECRET_PATH = r"(?:/(?!\.\.?(?:/|$))[A-Za-z0-9_.@+-]+)+"
SECRET_PATH_HINT = "an absolute path such as /etc/dgxspark/secrets/hf_token (letters, digits, _ . @ + - only; no ..)"
# Consumers that read their secret from a file a variable names: secret name -> that variable.
# huggingface_hub: HF_TOKEN_PATH, where it keeps and reads the User Access Token (its environment variables page).
PATH_VARIABLES = {"hf_token": "HF_TOKEN_PATH"}

# Environment names that hold a secret's value: module_utils/_secret_names.py (is_secret_name), the one rule, which
# node_facts and the preflight redact by. The plan's one exception to it, stated here only (secret_env_name: what
# the plan refuses, and what its problems redact): a variable whose name says it names a file (*_PATH, *_FILE;
# GOOGLE_APPLICATION_CREDENTIALS, Google's credentials file) and whose value is an absolute path holds a path, not
# the secret (HF_TOKEN_PATH=/run/secrets/hf_token, which the plan sets itself): refusing it would refuse the way a
# secret is meant to be given. The redactions that see only a name keep the plain rule: they hide a path, harmless.
NAMES_A_FILE = re.compile(r"_(?:PATH|FILE)$|^GOOGLE_APPLICATION_CREDENTIALS$", re.IGNORECASE)
# A Hugging Face User Access Token, wherever it is written.
HF_TOKEN_VALUE = re.compile(r"hf_[A-Za-z0-9]{30,}")
# vllm serve flags whose value is a secret (--hf-token alone, without a value, uses the stored token: allowed).
SECRET_FLAGS = {
    "--api-key": "vLLM's API key",
    "--hf-token": "the Hugging Face token",
}
_SEPARATORS = re.compile(r"(\s+|[,;\"'])")
# The shortest unique prefix of each in vLLM 0.33.0's option table (argparse completes any longer one): a test
# checks these against the table, which this module does not load (redaction runs wherever a problem is made).
SECRET_FLAG_PREFIXES = {"--api-key": "--api-k", "--hf-token": "--hf-t"}


def _spellings(flag: str) -> str:
    """A pattern for every spelling vLLM accepts of ``flag``: '_' for any '-' after the leading '--', and any prefix
    from its shortest unique one on (``--api_k``, ``--api-key``)."""
    shortest = SECRET_FLAG_PREFIXES[flag]

    def chars(text: str) -> str:
        return "".join("[-_]" if c == "-" else re.escape(c) for c in text)

    rest = flag[len(shortest) :]
    optional = "".join(f"(?:{chars(c)}" for c in rest) + ")?" * len(rest)
    return "--" + chars(shortest[2:]) + optional


_FLAG_VALUE = re.compile(r"(" + "|".join(_spellings(f) for f in SECRET_FLAGS) + r")(=|\s+)(?!<redacted|-)([^\s\"']+)")
_SECRET_FLAG = re.compile("(?:" + "|".join(_spellings(f) for f in SECRET_FLAGS) + ")")
# Any other long option whose name says it takes a secret (--token, --db-password, --auth-header): its value, unless
# the value cannot be one (a number, a boolean, an absolute path: --long-prefill-token-threshold 128, --ssl-keyfile
# /run/secrets/tls_key) or is the next option (--allow-credentials --port 8000); in running text after a space,
# unless a lowercase word ("--ssl-keyfile is rendered by the collection").
_LONG_FLAG_VALUE = re.compile(r"(?<![\w-])(--[A-Za-z][A-Za-z0-9_-]*)(=|\s+)(?!<redacted)([^\s\"']+)")
_NOT_A_SECRET_VALUE = re.compile(r"-.*|[-+]?\d+(?:\.\d+)?|true|false|yes|no|on|off|/.*", re.IGNORECASE)
# NAME=value: an environment variable, a --log-opt or --label key (splunk-token=..., a.b.token=...), and a name glued
# to short options (-eNAME=value, -teNAME=value, or an unknown -xNAME=value: the rule finds a word anywhere in it).
_ASSIGNED_NAME = re.compile(r"(-{0,2})([A-Za-z_][A-Za-z0-9_.-]*)")
# URL userinfo (scheme://user:password@host, scheme://token@host): the password, or a user alone, is hidden.
_URL_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)(?:([^/\s@:\"'<]*):)?([^/\s@:\"'<]+)@")
# An HTTP credential: "Authorization: Bearer x", "X-Api-Key: x" (a header whose name says it holds a secret), and a
# bearer token on its own (RFC 6750's characters, 8 or more: not the prose "a bearer token").
_HEADER = re.compile(r"(?<![\w-])([A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*)(\s*:\s*)([^\"'\n]+)")
_BEARER = re.compile(r"\b(bearer)(\s+)(?!<redacted)([A-Za-z0-9._~+/-]{8,}=*)(?![^\s\"'])", re.IGNORECASE)
_OPTION_NAME = re.compile(r"--[A-Za-z][A-Za-z0-9_-]*")


def redacted(value: str) -> str:
    """What is shown instead of a secret: its length only."""
    return f"<redacted, {len(value)} chars>"


def secret_env_name(name: str, value: Any = None) -> bool:
    """Whether a variable of this name holds a secret's value: :func:`is_secret_name`, less one that names a
    file by an absolute path (:data:`NAMES_A_FILE`)."""
    if not is_secret_name(name):
        return False
    return not (NAMES_A_FILE.search(name) and isinstance(value, str) and value.startswith("/"))


def secret_env_names(env: Mapping[str, Any] | None) -> list[str]:
    """The names of ``env`` that :func:`check_environment` refuses as a secret (a secret's name, or a value
    that holds a secret), sorted: what the ``dgxspark.cluster.secret_env_names`` filter returns."""
    if env is None:
        return []
    if not isinstance(env, Mapping):
        raise TypeError(f"an environment is a mapping of names to values, found {type(env).__name__}")
    return sorted(str(name) for name, value in env.items() if _holds_secret(str(name), value))


def _holds_secret(name: str, value: Any) -> bool:
    return secret_env_name(name, value) or (isinstance(value, str) and inline_secret(value))


def _secret_flag_value(flag: str, value: str) -> bool:
    """Whether ``value``, given to the long option ``flag``, is to be hidden."""
    if value.startswith("<redacted") or not _OPTION_NAME.fullmatch(flag):
        return False  # not an option that takes the next element (--api-key=x carries its own)
    if _SECRET_FLAG.fullmatch(flag):
        return not value.startswith("-")
    return is_secret_name(flag[2:].replace("-", "_")) and not _NOT_A_SECRET_VALUE.fullmatch(value)


def _long_flag(match: re.Match[str]) -> str:
    flag, between, value = match.groups()
    # in running text, "--token is refused" is prose: a value after a space is one when it is no lowercase word
    # (an argv's next element is read by redact_argv, whatever it is)
    if not _secret_flag_value(flag, value) or (between != "=" and value.isalpha() and value.islower()):
        return match.group(0)
    return f"{flag}{between}{redacted(value)}"


def _header(match: re.Match[str]) -> str:
    name, colon, value = match.groups()
    if "<redacted" in value or not ("-" in name or name.lower() == "authorization") or not is_secret_name(name):
        return match.group(0)
    value = value.rstrip()
    return f"{name}{colon}{redacted(value)}" + match.group(3)[len(value) :]


def _userinfo(match: re.Match[str]) -> str:
    scheme, user, secret = match.groups()
    return f"{scheme}{user}:{redacted(secret)}@" if user is not None else f"{scheme}{redacted(secret)}@"


def redact_text(text: str) -> str:
    """``text`` with every secret-looking value replaced by :func:`redacted`, the one redaction every problem and
    every printed argv goes through:

    - ``NAME=value`` of a secret's name (:func:`secret_env_name`), in every spelling of an environment option
      (``-e NAME=v``, ``-eNAME=v``, ``--env NAME=v``, ``--env=NAME=v``) and as a ``--log-opt`` or ``--label``
      (``splunk-token=...``);
    - the value of a secret flag (``--api-key v``, ``--api-key=v``, ``--hf-token``, any prefix vLLM accepts) or of
      another long option whose name says it takes a secret (``--token``), unless a number, a boolean or a path;
    - a URL's userinfo (``https://user:<redacted>@host``);
    - an HTTP credential: ``Authorization: ...``, ``X-Api-Key: ...``, ``Bearer ...``;
    - a Hugging Face token anywhere.
    """
    parts = _SEPARATORS.split(text)
    for index, part in enumerate(parts):
        words = part.split("=")
        for k in range(len(words) - 1):
            value = "=".join(words[k + 1 :])
            named = _ASSIGNED_NAME.fullmatch(words[k])
            if not named or not value or value.startswith("<redacted"):
                continue
            if named.group(1) == "--":  # a long option's own value: --token=x, not --ssl-keyfile=/run/secrets/k
                hide = _secret_flag_value(f"--{named.group(2)}", value)
            else:
                hide = secret_env_name(named.group(2), value)
            if hide:
                parts[index] = "=".join(words[: k + 1]) + "=" + redacted(value)
                break
    text = "".join(parts)
    text = _FLAG_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}{redacted(m.group(3))}", text)
    text = _LONG_FLAG_VALUE.sub(_long_flag, text)
    text = _URL_USERINFO.sub(_userinfo, text)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{redacted(m.group(3))}", text)
    text = _HEADER.sub(_header, text)
    return HF_TOKEN_VALUE.sub(lambda m: redacted(m.group(0)), text)


def redact_argv(argv: Sequence[Any]) -> list[str]:
    """An argv as it may be shown: each element through :func:`redact_text`, and an element that is the value of
    the element before it (``--api-key``, ``sk-...``; ``--token``, ``x``) hidden whole."""
    shown: list[str] = []
    previous = ""
    for item in argv:
        text = str(item)
        shown.append(redacted(text) if _secret_flag_value(previous, text) else redact_text(text))
        previous = text
    return shown


def redact(value: Any) -> Any:
    """:func:`redact_text` through strings, lists (read as an argv: :func:`redact_argv`) and mappings (a
    problem's ``found``, a module's result, a rank's environment: a value under a secret's name is hidden whole).
    What holds nothing to hide is returned as it is, the same object (a module result keeps its own types)."""
    if isinstance(value, str):
        shown = redact_text(value)
        return value if shown == value else shown
    if isinstance(value, (list, tuple)):
        if all(isinstance(item, str) for item in value):
            items: list[Any] = redact_argv(value)
            items = [old if old == new else new for old, new in zip(value, items, strict=True)]
        else:
            items = [redact(item) for item in value]
        return value if all(a is b for a, b in zip(value, items, strict=True)) else type(value)(items)
    if isinstance(value, Mapping):
        shown_map = {
            key: (
                redacted(str(item))
                if isinstance(key, str) and item not in (None, "") and secret_env_name(key, item)
                else redact(item)
            )
            for key, item in value.items()
        }
        return value if all(shown_map[k] is value[k] for k in value) else shown_map
    return value


def inline_secret(text: str) -> bool:
    """Whether ``text`` holds a secret's value, as :func:`redact_text` would hide it."""
    return redact_text(text) != text


def argv_secrets(argv: Sequence[Any]) -> list[int]:
    """The indexes of the elements of ``argv`` that :func:`redact_argv` hides (or hides part of): what the plan's
    scan of a rank's whole argv refuses."""
    return [i for i, (item, shown) in enumerate(zip(argv, redact_argv(argv), strict=True)) if str(item) != shown]


def mount_target(name: str) -> str:
    return f"{SECRETS_DIR}/{name}"


def mount_args(secrets: Mapping[str, str]) -> list[str]:
    """Each secret's read-only bind, as the ``docker run`` option the plan adds to every rank (sorted by name)."""
    return [
        f"--mount=type=bind,source={path},target={mount_target(name)},readonly"
        for name, path in sorted(secrets.items())
    ]


def mount_paths(secrets: Mapping[str, str]) -> list[str]:
    """The JSON path of each of :func:`mount_args`, in the same order."""
    return [f"$.{FIELD}.{name}" for name in sorted(secrets)]


def environment(secrets: Mapping[str, str]) -> dict[str, str]:
    """The variables that tell a consumer where its secret is: a path in the rank, never a value."""
    return {PATH_VARIABLES[name]: mount_target(name) for name in sorted(secrets) if name in PATH_VARIABLES}


def hint() -> str:
    return (
        f"put the secret in a file on every node (root's, mode 0600) and name it in {FIELD} "
        f'(e.g. "hf_token": "/etc/dgxspark/secrets/hf_token"): each file is bound read-only at '
        f"{SECRETS_DIR}/<name>, and hf_token sets HF_TOKEN_PATH to it"
    )


def check_environment(env: Mapping[str, Any], where: str, out: Collector, secrets: Mapping[str, str]) -> None:
    """Refuse a secret in an environment map (a shape's, a host's override), without repeating it."""
    for name in sorted(env):
        value = env[name]
        shown = f"{name}={redacted(str(value))}"
        if secret_env_name(name, value):
            out.error(
                f"{where}.{name}",
                "a secret in the environment: it would be rendered into the plan's argv, the docker_container "
                "parameters and docker inspect",
                found=shown,
                expected="no secret in the profile or the inventory",
                hint=hint(),
            )
        elif isinstance(value, str) and inline_secret(value):
            out.error(
                f"{where}.{name}",
                "a secret's value in the environment (a Hugging Face token, a URL's password, an HTTP credential): "
                "it would be rendered into the plan's argv, the docker_container parameters and docker inspect",
                found=shown,
                expected="no secret in the profile or the inventory",
                hint=hint(),
            )
        elif name in environment(secrets):
            out.error(
                f"{where}.{name}",
                f"{name} is set by {FIELD} (the path of the secret's file in the rank)",
                found=f"{name}={value}",
                expected=f"no {name} here",
            )


def check_docker_args(args: Sequence[str], paths: Sequence[str], out: Collector) -> set[int]:
    """Refuse a ``-e``/``--env`` option that carries a secret (its name or its value), or any option holding a
    Hugging Face token, without repeating it; returns the indexes of the elements refused (their other
    problems, which would show the element as written, are left out). The options are read by ``_docker_args``'
    one reader (``-e A=1``, ``-eA=1``, ``-e=A=1``, ``--env=A=1`` alike)."""
    from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.docker_args import parse_docker_args

    refused: set[int] = set()
    for option in parse_docker_args([str(a) for a in args]):
        taken = range(option.index, max(option.end, option.index + 1))
        if refused.intersection(taken):
            continue  # another option of the same element (-it) was refused already
        is_env = option.name == "--env"
        var, _eq, val = (option.value or "").partition("=")
        if (is_env and secret_env_name(var, val)) or inline_secret(option.text):
            out.error(
                paths[option.index],
                "a secret in a docker run option: it would be rendered into the plan's argv, the docker_container "
                "parameters and docker inspect",
                found=_redacted_option(option.text, is_env, var, val),
                expected="no secret in docker_run_args",
                hint=hint(),
            )
            refused.update(taken)
    return refused


def _redacted_option(text: str, is_env: bool, var: str, val: str) -> str:
    """An option refused as a secret, as its problem shows it: an environment option as the option, the variable's
    name and the length of everything after it (``-e NAME=<redacted, 12 chars>``, whatever separates them: a value
    written ``-eNAME value`` is hidden too); any other as :func:`redact_text` shows it."""
    value = f"{var}={val}" if val else var
    if not is_env or not text.endswith(value):
        return redact_text(text)
    name = re.match(r"[A-Za-z_][A-Za-z0-9_]*", value)
    shown = name.group(0) if name else ""
    rest = value[len(shown) :].removeprefix("=")
    return text[: len(text) - len(value)] + shown + (f"={redacted(rest)}" if rest else "")


def check_command(container: Mapping[str, Any], out: Collector) -> None:
    """Refuse a secret in the words the engine runs beside ``serve_args``: ``container.entrypoint`` and
    ``container.model_path`` (``--api-key=...`` there would be rendered into argv like any other flag), without
    repeating it. ``serve_args`` has its own check (``vllm.check_serve_args``)."""
    entrypoint = container.get("entrypoint")
    words = [str(w) for w in entrypoint] if isinstance(entrypoint, list) else []
    paths = [f"$.container.entrypoint[{i}]" for i in range(len(words))]
    if isinstance(container.get("model_path"), str):
        words.append(container["model_path"])
        paths.append("$.container.model_path")
    for index in argv_secrets(words):
        out.error(
            paths[index],
            "a secret in the engine's command: it would be rendered into the plan's argv, docker inspect and vLLM's "
            "log of its own arguments",
            found=redact_argv(words)[index],
            expected="no secret in container.entrypoint or container.model_path",
            hint=hint(),
        )


def check_argv(argv: Sequence[Any], where: str, out: Collector) -> None:
    """The plan's last look at a rank's whole rendered ``docker run`` argv (options, environment, entrypoint, image,
    command): an element :func:`redact_argv` would hide is refused, so what the plan shows redacted is never
    what it runs with a secret in it."""
    shown = redact_argv(argv)
    for index in argv_secrets(argv):
        out.error(
            f"{where}[{index}]",
            "a secret in the rank's rendered argv: it would be shown in the plan, docker inspect and the logs",
            found=shown[index],
            expected="no secret in the argv",
            hint=hint(),
        )


def serve_arg_secret(flag: str, values: Sequence[str]) -> str | None:
    """The redacted form of a secret given to a ``vllm serve`` flag, or None when there is none."""
    if flag in SECRET_FLAGS and values:
        return f"{flag}=" + " ".join(redacted(v) for v in values)
    return None


# ------------------------------------------------------------------ playbooks/secrets.yml: the values given
VALUES_VAR = "dgxspark_secret_values"


# the secrets the profile's container.api names (the API's key and TLS files), not container.secrets
API_SECRET_NAMES = ("vllm_api_key", "vllm_tls_certfile", "vllm_tls_keyfile")


def values_refused(values: Any, secrets: Mapping[str, str], profile: str = "", secrets_dir: str = "") -> str:
    """Why the values given for the profile's ``secrets`` (name -> file on the nodes) are refused before anything is
    written, naming secrets only, never a value: not a mapping of name to text, a name the profile does not have
    (its secrets listed, then the fix: name it in the profile first, or point the playbook at the profile that
    does; ``profile``: the profile this run read, ``secrets_dir``: its host.secrets_dir), a value that is not text.
    Empty when they are fine."""
    if not isinstance(values, Mapping):
        return f"give {VALUES_VAR}, a mapping of secret name to its text (from Ansible Vault or an AWX credential)"
    unknown = sorted(str(name) for name in values if name not in secrets)
    if unknown:
        known = ", ".join(sorted(str(name) for name in secrets)) or "none"
        directory = (secrets_dir or "/etc/dgxspark/secrets").rstrip("/")
        named = [name for name in unknown if name not in API_SECRET_NAMES]
        fixes = []
        if named:
            files = ", ".join(f'"{name}": "{directory}/{name}"' for name in named)
            fixes.append(f"name each in the profile's container.secrets first ({files})")
        if len(named) < len(unknown):
            fixes.append(
                "give the API's key and TLS files in the profile's container.api first (api_key_file, tls.certfile, "
                "tls.keyfile)"
            )
        where = f" (this run read {profile})" if profile else ""
        return (
            f"not secrets of the profile: {', '.join(unknown)} (its secrets: {known}). A secret is written only where "
            f"the profile names its file: {'; '.join(fixes)}, or point the playbook at the profile that names them "
            f"with -e dgxspark_profile=PATH{where}"
        )
    not_text = sorted(str(name) for name, value in values.items() if not isinstance(value, str))
    if not_text:
        return "values that are not text: " + ", ".join(not_text)
    return ""


def files_given(secrets: Mapping[str, str], values: Mapping[str, Any], directory: str) -> list[dict[str, str]]:
    """The profile's secrets that are given a value, each as ``key`` (its name) and ``value`` (its file on the
    nodes: the file's name in ``directory``, the plan's one secrets directory), in the profile's order. An empty
    value is none (a credential's field left blank): that file is left as it is. Raises ``ValueError`` naming the
    secrets whose file is not directly in ``directory`` (the plan refuses such a profile; this holds the writer to
    it too), so nothing is ever written elsewhere."""
    from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.policy import in_secrets_dir

    given = [(name, path) for name, path in secrets.items() if name in values and values[name] != ""]
    outside = [name for name, path in given if not in_secrets_dir(str(path), directory)]
    if outside:
        raise ValueError(f"files outside the secrets directory {directory}: {', '.join(outside)}")
    return [{"key": name, "value": posixpath.join(directory, posixpath.basename(str(path)))} for name, path in given]


def directories(given: Sequence[Mapping[str, str]]) -> list[str]:
    """The directories of the secrets' files given (:func:`files_given`), once each, sorted."""
    return sorted({posixpath.dirname(str(item["value"])) for item in given})
