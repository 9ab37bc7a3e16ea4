# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A profile's image reference, and how a node's images answer it: by tag, by digest or by ID.

Every rank starts through ``community.docker.docker_container`` with ``pull: never``, so an image is found
only the way that module looks for it (community.docker 5.4, ``_common_api.py``: ``_image_lookup`` and
``find_image``; ``_module_container/module.py``: ``_get_image``):

- ``sha256:<64 hex>``: an image ID, looked up as such;
- ``name`` or ``name:tag``: the tag (``latest`` when none is written) among the image's ``RepoTags``;
- ``name@sha256:<64 hex>``: that repository digest among the image's ``RepoDigests`` (a registry gives them,
  by a pull or a push); an image that has the same ID but not the digest is not found;
- ``name:tag@sha256:<64 hex>`` is looked for as ``name:tag@sha256:...`` among ``RepoDigests``, which never
  hold a tag: it is never found, so a profile may not name an image so.

Names are compared as Docker shows them (``ubuntu``, not ``docker.io/library/ubuntu``), as the module's own
fallbacks for Docker Hub do. Plain data in and out; node_facts' ``docker.images`` entries have ``id``, ``tags``
and ``digests``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Collector

DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_HUB_PREFIXES = ("docker.io/library/", "index.docker.io/library/", "docker.io/", "index.docker.io/")


@dataclass(frozen=True)
class ImageRef:
    """An image reference, split: ``repository`` is empty for an image ID, whose ``digest`` is the ID."""

    text: str
    repository: str
    tag: str | None
    digest: str | None

    @property
    def by_id(self) -> bool:
        return not self.repository and self.digest is not None

    @property
    def wanted(self) -> str:
        """What a node's image must show: its ID, a repository digest, or a tag (``latest`` by default)."""
        if self.by_id:
            return str(self.digest)
        if self.digest:
            return f"{familiar(self.repository)}@{self.digest}"
        return f"{familiar(self.repository)}:{self.tag or 'latest'}"


def familiar(name: str) -> str:
    """A repository as Docker lists it: Docker Hub's ``docker.io/library/`` and ``docker.io/`` left out."""
    for prefix in _HUB_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def parse_reference(text: str) -> ImageRef:
    """``name[:tag][@sha256:...]`` or ``sha256:<ID>`` (the forms the profile's schema accepts)."""
    if DIGEST.fullmatch(text):
        return ImageRef(text, "", None, text)
    name, at, digest = text.partition("@")
    repository, colon, tag = name.rpartition(":")
    if not colon or "/" in tag:
        repository, tag = name, ""
    return ImageRef(text, repository, tag or None, digest if at else None)


def find_image(images: Sequence[Mapping[str, Any]], reference: str) -> Mapping[str, Any] | None:
    """The node's image that ``reference`` names, found as the module that starts the rank finds it."""
    ref = parse_reference(reference)
    wanted = ref.wanted
    for image in images:
        if not isinstance(image, Mapping):
            continue
        if ref.by_id:
            if image.get("id") == wanted:
                return image
        elif wanted in [familiar(str(name)) for name in image.get("digests" if ref.digest else "tags") or []]:
            return image
    return None


def _repository_of(name: str) -> str:
    """``repo`` of ``repo:tag`` or ``repo@sha256:...``."""
    if "@" in name:
        return name.split("@", 1)[0]
    repository, colon, tag = name.rpartition(":")
    return repository if colon and "/" not in tag else name


def near_misses(images: Sequence[Mapping[str, Any]], reference: str) -> list[str]:
    """For a reference by digest that no image answers: the node's images that have its digest as their ID or
    share its repository, each as ``ID (tags and repository digests)``, to show what the node holds instead."""
    ref = parse_reference(reference)
    if not ref.digest:
        return []
    repository = familiar(ref.repository)
    found = []
    for image in images:
        if not isinstance(image, Mapping):
            continue
        names = [familiar(str(n)) for n in [*(image.get("tags") or []), *(image.get("digests") or [])]]
        if image.get("id") == ref.digest or (repository and repository in map(_repository_of, names)):
            found.append(f"{image.get('id')} ({', '.join(names) or 'no tag and no repository digest'})")
    return found


def check_image_reference(image: Any, where: str, out: Collector) -> None:
    """A profile's image that no node could start from: a tag and a digest together."""
    if not isinstance(image, str):
        return
    ref = parse_reference(image)
    if ref.repository and ref.tag and ref.digest:
        out.error(
            where,
            "an image named by tag and digest together: community.docker.docker_container, which starts every rank "
            f"(pull: never), looks for '{image}' among the image's repository digests, which never hold a tag, so "
            "no node would find it",
            found=image,
            expected=f"{ref.repository}@{ref.digest} (the repository digest), or the image ID alone (sha256:<64 hex>)",
        )


def pin_warning(image: Any) -> str:
    """Why an image named by tag alone is worth a warning on a real cluster, or empty for one named by digest or
    ID (or not a string): a tag names whatever image each node has under it, so the preflight can prove no more
    than that the tag is there."""
    if not isinstance(image, str):
        return ""
    ref = parse_reference(image)
    if ref.digest:
        return ""
    return (
        f"the image is named by tag ({ref.wanted}): each node runs whatever image it holds under that tag. Name it by "
        "its repository digest (name@sha256:<digest>, from a registry) or its ID (sha256:<64 hex>: the Id docker "
        "image inspect shows on the node that built it), and the preflight's image-present and image-id "
        'prove that every node holds that build (docs/security.md, "Supply chain"); an inventory whose images '
        "cannot be pinned (the simulated clusters build theirs) says why in dgxspark_image_by_tag"
    )
