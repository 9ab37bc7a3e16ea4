# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared test helpers: the shipped profiles, seed 000's own profile, and edits of them."""

from __future__ import annotations

import copy
import datetime
import ipaddress
import json
import pathlib
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
SPARK3 = ROOT / "inventories" / "spark3" / "serving-profile.json"
SPARK8 = ROOT / "inventories" / "spark8" / "serving-profile.json"
SEED000 = FIXTURES / "seed000-serving-profile.json"
DELETE = object()
# inventories/spark3 without its weights (host.weights_path, their read-only bind, the model path inside it) and
# seed 000's KV cost per token: the profile as the preflight tests' nodes, which report no weights, were written for
SPARK3_WITHOUT_WEIGHTS_EDITS: dict[str, Any] = {
    "host/weights_path": DELETE,
    "sources/$.host.weights_path": DELETE,
    "container/model_path": "deepseek-ai/DeepSeek-V4.1-Flash-1017",
    "sources/$.container.model_path": "seed 000 README: weights deepseek-ai/DeepSeek-V4.1-Flash-1017 (a hub id; mount "
    "your Hugging Face cache or set a local path)",
    "sources/$.container.docker_run_args": "seed 000 dataset preview (first 9 elements) and README 'Container runtime "
    "arguments that matter' (--shm-size=16g, --memory=112g, --memory-swap=112g); seed 000 also pins a --cpuset-cpus "
    "set it does not publish: add yours per host in dgxspark_overrides",
    "model_config": DELETE,
    "sources/$.model_config.kv_cache_bytes_per_token": DELETE,
}


def spark3_without_weights_file() -> pathlib.Path:
    """:func:`spark3_without_weights` written once to a file of its own, for the plugins that read a profile's path."""
    import tempfile

    global _SPARK3_WITHOUT_WEIGHTS_FILE
    if _SPARK3_WITHOUT_WEIGHTS_FILE is None:
        path = pathlib.Path(tempfile.mkdtemp(prefix="spark3-without-weights-")) / "serving-profile.json"
        path.write_text(json.dumps(spark3_without_weights(), indent=2) + "\n", encoding="utf-8")
        _SPARK3_WITHOUT_WEIGHTS_FILE = path
    return _SPARK3_WITHOUT_WEIGHTS_FILE


_SPARK3_WITHOUT_WEIGHTS_FILE: pathlib.Path | None = None


def spark3_without_weights() -> dict[str, Any]:
    """inventories/spark3's profile with no weights on the nodes (:data:`SPARK3_WITHOUT_WEIGHTS_EDITS`)."""
    data = edited(json.loads(SPARK3.read_text()), SPARK3_WITHOUT_WEIGHTS_EDITS)
    data["container"]["docker_run_args"] = [a for a in data["container"]["docker_run_args"] if "/models" not in a]
    return data


def self_signed_certificate(directory: pathlib.Path, name: str = "server") -> tuple[pathlib.Path, pathlib.Path]:
    """A self-signed certificate for 127.0.0.1 (an IP subjectAltName, valid a day either side of now) and its
    private key, as ``<name>.crt`` and ``<name>.key`` (0600) in ``directory``: a loopback TLS server's files,
    and the CA file its clients trust."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key_path.chmod(0o600)
    return cert_path, key_path


def read(path: pathlib.Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def edited(document: dict[str, Any], edits: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``document`` with ``{"a.b.0.c": value}`` edits applied (DELETE removes a key)."""
    result = copy.deepcopy(document)
    for dotted, value in edits.items():
        *parents, last = dotted.split("/")
        node: Any = result
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
        if isinstance(node, list):
            node[int(last)] = value
        elif value is DELETE:
            del node[last]
        else:
            node[last] = value
    return result


@pytest.fixture
def seed000() -> dict[str, Any]:
    return read(SEED000)


@pytest.fixture
def spark3() -> dict[str, Any]:
    return read(SPARK3)


@pytest.fixture
def spark8() -> dict[str, Any]:
    return read(SPARK8)
