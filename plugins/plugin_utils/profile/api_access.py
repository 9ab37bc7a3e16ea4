# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The served API's access: where it listens, its key, its TLS (the profile's ``container.api``).

- ``bind``: ``management`` (the default: the head's ``ansible_host``; loopback, warned, where that is no address),
  ``loopback`` (127.0.0.1), ``all`` (every interface, as vLLM does without ``--host``: a warning), or an address
  the inventory gives the head (its ``ansible_host`` or its ``dgxspark_fabric_address``) or a loopback address.
  The head's command gets ``--host <address>``.
- ``api_key_file``: a file on every node (root's, 0600) holding the key. It is a secret like those of
  ``container.secrets``: bound read-only at ``/run/secrets/vllm_api_key`` and checked by the preflight's
  ``secret-files``. The head's container starts ``/bin/sh -c`` with :data:`KEY_WRAPPER`, which reads the file
  into ``VLLM_API_KEY`` (vLLM's ``args.api_key or envs.VLLM_API_KEY``) and ``exec``s the engine: the key is in
  no argv, no ``docker inspect`` Env, no plan, and nothing on the controller reads it.
- ``tls``: ``certfile`` and ``keyfile`` on every node, bound read-only as secrets and given to vLLM as
  ``--ssl-certfile``/``--ssl-keyfile`` (vLLM 0.33.0's flags); ``ca_file``, on the node, is what the boot's
  clients trust (default: ``certfile``, for a self-signed certificate).

The boot's wait and smoke completion and the benchmark connect from a node (the head by default) to
:func:`resolve`'s ``connect`` address with the scheme, reading the key from ``api_key_file`` there.

No Ansible imports.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile import secrets as _secrets

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Collector

FIELD = "container.api"
BIND_CHOICES = ("management", "loopback", "all")
BIND_PATTERN = r"management|loopback|all|[0-9A-Fa-f:.]{2,45}"
BIND_HINT = "management (the head's ansible_host), loopback, all, or an address of the head"
DEFAULT_BIND = "management"
# The names under which the API's files are bound into the rank, as secrets (/run/secrets/<name>).
KEY_SECRET = "vllm_api_key"
CERT_SECRET = "vllm_tls_certfile"
TLS_KEY_SECRET = "vllm_tls_keyfile"
RESERVED = (KEY_SECRET, CERT_SECRET, TLS_KEY_SECRET)
# Where each of them is given in the profile (a problem about its bind names this place).
SECRET_PATHS = {
    KEY_SECRET: f"$.{FIELD}.api_key_file",
    CERT_SECRET: f"$.{FIELD}.tls.certfile",
    TLS_KEY_SECRET: f"$.{FIELD}.tls.keyfile",
}
# The head's container command with a key: sh reads the key file into VLLM_API_KEY and execs the engine
# ("$0" "$@": the entrypoint and its command as the plan renders them). No value is ever in argv.
KEY_WRAPPER = (
    f'VLLM_API_KEY="$(cat {_secrets.mount_target(KEY_SECRET)})" && [ -n "$VLLM_API_KEY" ] '
    '&& export VLLM_API_KEY && exec "$0" "$@"'
)
WRAPPER_SHELL = "/bin/sh"


def api_of(data: Mapping[str, Any]) -> dict[str, Any]:
    """The profile's ``container.api`` with its defaults (none of which lands in the profile's hash)."""
    container = data.get("container")
    api = container.get("api") if isinstance(container, Mapping) else None
    api = dict(api) if isinstance(api, Mapping) else {}
    api.setdefault("bind", DEFAULT_BIND)
    tls = api.get("tls")
    if isinstance(tls, Mapping):
        tls = dict(tls)
        tls.setdefault("ca_file", tls.get("certfile"))
        api["tls"] = tls
    else:
        api["tls"] = None
    api.setdefault("api_key_file", None)
    return api


def api_secrets(data: Mapping[str, Any]) -> dict[str, str]:
    """The API's files that are bound into the ranks as secrets (name -> the file on every node)."""
    api = api_of(data)
    found: dict[str, str] = {}
    if isinstance(api.get("api_key_file"), str):
        found[KEY_SECRET] = api["api_key_file"]
    tls = api.get("tls") or {}
    for name, key in ((CERT_SECRET, "certfile"), (TLS_KEY_SECRET, "keyfile")):
        if isinstance(tls.get(key), str):
            found[name] = tls[key]
    return found


def check_profile(data: Mapping[str, Any], out: Collector) -> None:
    """What the profile alone can tell: no ``container.secrets`` entry under the API's own names."""
    container = data.get("container")
    secrets = container.get("secrets") if isinstance(container, Mapping) else None
    if not isinstance(secrets, Mapping):
        return
    for name in RESERVED:
        if name in secrets:
            out.error(
                f"$.container.secrets.{name}",
                f"{name} is the name the API's own file is bound under (/run/secrets/{name})",
                found=name,
                expected="another name",
                hint=f"give the API's key and TLS files in {FIELD} (api_key_file, tls.certfile, tls.keyfile)",
            )


def _address(value: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(str(value).strip())
    except ValueError:
        return None


def url_host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def resolve(api: Mapping[str, Any], head: Any, out: Collector) -> dict[str, Any] | None:
    """Where the head listens (``bind``, for ``--host``), where the boot connects on the head (``connect``) and
    where clients reach it (``address``); a problem, and None, where it cannot be known from the inventory."""
    bind = str(api.get("bind") or DEFAULT_BIND)
    where = f"$.{FIELD}.bind"
    management = _address(head.management_address) if head.management_address else None
    fabric = _address(head.fabric_address)
    if bind == "management":
        if management is None or management.is_unspecified or management.is_multicast:
            # not known as an address here (none, or a name): the safe side, loopback, said loudly
            out.warn(
                where,
                f"the API binds the head's management address, and the head {head.name}'s ansible_host is not an "
                "address: it listens on loopback (127.0.0.1) only, for the head alone",
                found=f"ansible_host={head.management_address}" if head.management_address else "no ansible_host",
                expected="the head's ansible_host as an IPv4 or IPv6 address",
                hint="give the head an ansible_host address, or set container.api.bind to loopback, all or an address",
            )
            return {"bind": "127.0.0.1", "connect": "127.0.0.1", "address": "127.0.0.1"}
        address = str(management)
        return {"bind": address, "connect": address, "address": address}
    if bind == "loopback":
        return {"bind": "127.0.0.1", "connect": "127.0.0.1", "address": "127.0.0.1"}
    if bind == "all":
        out.warn(
            where,
            "the API listens on every interface of the head (vLLM without --host): firewall it (docs/security.md)",
            found=bind,
            expected=f"{DEFAULT_BIND}, loopback or an address of the head",
        )
        return {"bind": "0.0.0.0", "connect": "127.0.0.1", "address": str(management or head.name)}
    chosen = _address(bind)
    own = {a for a in (management, fabric) if a is not None}
    if chosen is None or not (chosen in own or chosen.is_loopback):
        out.error(
            where,
            f"not an address of the head {head.name}: the engine could not bind it",
            found=bind,
            expected="the head's ansible_host ("
            + (str(management) if management else "not an address")
            + f") or dgxspark_fabric_address ({fabric}), a loopback address, management, loopback or all",
            hint=BIND_HINT,
        )
        return None
    address = str(chosen)
    return {"bind": address, "connect": address, "address": address}


def head_flags(api: Mapping[str, Any], bind: str) -> list[str]:
    """The head's ``vllm serve`` flags for the API: ``--host`` and, with TLS, the files as bound in the rank."""
    flags = ["--host", bind]
    if api.get("tls"):
        flags += ["--ssl-certfile", _secrets.mount_target(CERT_SECRET)]
        flags += ["--ssl-keyfile", _secrets.mount_target(TLS_KEY_SECRET)]
    return flags


def wrapped(api: Mapping[str, Any], entrypoint: str, command: list[str]) -> tuple[str, list[str]]:
    """The head's entrypoint and command: with a key, :data:`KEY_WRAPPER` under ``/bin/sh`` before the engine."""
    if not api.get("api_key_file"):
        return entrypoint, command
    return WRAPPER_SHELL, ["-c", KEY_WRAPPER, entrypoint, *command]


def unwrapped(entrypoint: str, command: list[str]) -> tuple[str, list[str]]:
    """The engine's own entrypoint and command, given a rank's (:func:`wrapped`'s undone: the head with a key)."""
    if entrypoint == WRAPPER_SHELL and command[:2] == ["-c", KEY_WRAPPER] and len(command) > 2:
        return command[2], command[3:]
    return entrypoint, command


def summary(api: Mapping[str, Any], where: Mapping[str, Any], port: int) -> dict[str, Any]:
    """The plan's ``api``: what the boot's clients and the report need (paths on the nodes, never a value)."""
    tls = api.get("tls") or {}
    scheme = "https" if tls else "http"
    return {
        "scheme": scheme,
        "bind": where["bind"],
        "connect": where["connect"],
        "address": where["address"],
        "port": port,
        "url": f"{scheme}://{url_host(where['connect'])}:{port}",
        "api_url": f"{scheme}://{url_host(where['address'])}:{port}/v1",
        "api_key_file": api.get("api_key_file"),
        "ca_file": tls.get("ca_file"),
    }
