# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Images by tag, by repository digest and by ID: the profile's reference, the preflight's image-present check
and the release record's image IDs, against the GB10 engine's images (node_facts' fixture: the tags, digests
and short IDs of a real Spark's `docker images`, see tests/unit/fixtures/node_facts/README.md)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.plan import build_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.boot import image_ids
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.checks import preflight
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.images import (
    ImageRef,
    find_image,
    near_misses,
    parse_reference,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import validate_profile
from ansible_collections.dgxspark.cluster.tests.unit.conftest import SPARK3, SPARK8, edited, read
from ansible_collections.dgxspark.cluster.tests.unit.plugins.plugin_utils.test__preflight import (
    HOSTS,
    PROFILE,
    by,
    facts,
    gb10_docker,
    node,
    plan_with,
)

DOCKER = gb10_docker()
IMAGES = DOCKER["images"]
# From the GB10 engine's images (sample host-env.spark-node0.colonel-otto-...: `docker images` with digests).
DSPARK = "ghcr.io/anemll/dspark-vllm-gx10"
DSPARK_DIGEST = "sha256:a83948492cf13df455170fb42885f5ef4db54fefe0feff0f841ecbff464ac9d8"
DSPARK_ID = "sha256:3430d6614a8e0000000000000000000000000000000000000000000000000000"
SPARK_DS41F_ID = "sha256:4f0d7c3b9a1e82d65c0b7a4e9f13d2c8b6a5e0f7d4c3b2a19087f6e5d4c3b2a1"
OTHER = "sha256:" + "e" * 64


@pytest.mark.parametrize(
    "text,expected",
    [
        ("spark-ds41f:1030", ImageRef("spark-ds41f:1030", "spark-ds41f", "1030", None)),
        ("spark-ds41f", ImageRef("spark-ds41f", "spark-ds41f", None, None)),
        (f"{DSPARK}@{DSPARK_DIGEST}", ImageRef(f"{DSPARK}@{DSPARK_DIGEST}", DSPARK, None, DSPARK_DIGEST)),
        (
            f"{DSPARK}:0.1.1@{DSPARK_DIGEST}",
            ImageRef(f"{DSPARK}:0.1.1@{DSPARK_DIGEST}", DSPARK, "0.1.1", DSPARK_DIGEST),
        ),
        (DSPARK_ID, ImageRef(DSPARK_ID, "", None, DSPARK_ID)),
        ("registry.lan:5000/vllm", ImageRef("registry.lan:5000/vllm", "registry.lan:5000/vllm", None, None)),
    ],
)
def test_parse_reference(text: str, expected: ImageRef) -> None:
    assert parse_reference(text) == expected


@pytest.mark.parametrize(
    "reference,found",
    [
        ("spark-ds41f:1030", SPARK_DS41F_ID),
        ("spark-ds41f", None),  # latest, which this node does not have
        (f"{DSPARK}@{DSPARK_DIGEST}", DSPARK_ID),
        (f"{DSPARK}@{OTHER}", None),  # another build of the same repository
        (f"ghcr.io/someone/else@{DSPARK_DIGEST}", None),  # the digest under another repository
        (f"{DSPARK}@{DSPARK_ID}", None),  # an ID is not a repository digest: docker_container would not find it
        (SPARK_DS41F_ID, SPARK_DS41F_ID),
        (OTHER, None),
        ("nvcr.io/nvidia/vllm:25.11-py3", "sha256:d33d4cadbe0f0000000000000000000000000000000000000000000000000000"),
    ],
)
def test_find_image_as_docker_container_finds_it(reference: str, found: str | None) -> None:
    image = find_image(IMAGES, reference)
    assert (image or {}).get("id") == found


def test_docker_hub_names_are_compared_as_docker_lists_them() -> None:
    hub = [{"id": OTHER, "tags": ["ubuntu:24.04"], "digests": [f"ubuntu@{DSPARK_DIGEST}"]}]
    assert find_image(hub, "docker.io/library/ubuntu:24.04") is hub[0]
    assert find_image(hub, f"docker.io/library/ubuntu@{DSPARK_DIGEST}") is hub[0]
    assert find_image(hub, "ubuntu") is None


def test_near_misses_name_what_the_node_holds_instead() -> None:
    assert near_misses(IMAGES, f"{DSPARK}@{OTHER}") == [
        f"{DSPARK_ID} ({DSPARK}:0.1.1, {DSPARK}@{DSPARK_DIGEST})",
    ]
    assert near_misses(IMAGES, "spark-ds41f:1031") == []  # by tag: the plain "not on this node" says enough


# ---------------------------------------------------------------- the profile
@pytest.mark.parametrize(
    "edits,where",
    [
        ({"container/image": f"{DSPARK}:0.1.1@{DSPARK_DIGEST}"}, "$.container.image"),
        (
            {"shapes/tp3-triangle/container": {"image": f"{DSPARK}:0.1.1@{DSPARK_DIGEST}"}},
            "$.shapes.tp3-triangle.container.image",
        ),
    ],
)
def test_a_tag_and_a_digest_together_are_refused(edits: dict[str, Any], where: str) -> None:
    with pytest.raises(ProfileError) as caught:
        validate_profile(edited(json.loads(SPARK3.read_text()), edits), "profile.json")
    (problem,) = caught.value.problems
    assert problem.where == where
    assert problem.message.startswith("an image named by tag and digest together: community.docker.docker_container")
    assert problem.found == f"{DSPARK}:0.1.1@{DSPARK_DIGEST}"
    assert problem.expected == (
        f"{DSPARK}@{DSPARK_DIGEST} (the repository digest), or the image ID alone (sha256:<64 hex>)"
    )


@pytest.mark.parametrize("image", [f"{DSPARK}@{DSPARK_DIGEST}", SPARK_DS41F_ID])
def test_an_image_by_digest_or_by_id_is_a_valid_profile(image: str) -> None:
    validate_profile(edited(json.loads(SPARK3.read_text()), {"container/image": image}), "profile.json")


# ---------------------------------------------------------------- the preflight's image-present and image-id
def nodes_with(images: list[dict[str, Any]], **per_host: list[dict[str, Any]]) -> dict[str, Any]:
    given = {}
    for i, host in enumerate(HOSTS):
        facts_of = node(i)
        facts_of["docker"]["images"] = copy.deepcopy(per_host.get(host, images))
        given[host] = facts_of
    return facts(**given)


def image_lines(image: str, given: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    plan = plan_with({"container/image": image})
    result = preflight(given, plan, PROFILE.data)
    return result, by(result, "image-present", "spark-w1")


def test_an_image_named_by_digest_passes_where_the_node_holds_that_digest() -> None:
    result, line = image_lines(f"{DSPARK}@{DSPARK_DIGEST}", nodes_with(IMAGES))
    assert (line["status"], line["message"]) == ("PASS", f"{DSPARK}@{DSPARK_DIGEST} is {DSPARK_ID}")
    assert by(result, "image-id", "all")["message"] == f"the same image ID on 3 node(s): {DSPARK_ID}"


def test_a_node_whose_image_of_that_name_has_another_digest_fails() -> None:
    rebuilt = copy.deepcopy(IMAGES)
    rebuilt[2].update(id=OTHER, digests=[f"{DSPARK}@sha256:{'f' * 64}"])
    result, line = image_lines(f"{DSPARK}@{DSPARK_DIGEST}", nodes_with(IMAGES, **{"spark-w1": rebuilt}))
    assert line["status"] == "FAIL"
    assert line["message"] == (
        f"{DSPARK}@{DSPARK_DIGEST} is not on this node as named: no image of that name here carries digest "
        f"{DSPARK_DIGEST}, only {OTHER} ({DSPARK}:0.1.1, {DSPARK}@sha256:{'f' * 64}): another build, or the same "
        "one copied without a registry, which keeps no repository digest; put the named image there (a boot never "
        "pulls), or name the image by its ID (docker image ls --no-trunc shows it) in the profile"
    )
    assert [(f["check"], f["host"]) for f in result["failures"]] == [("image-present", "spark-w1")]


def test_the_same_image_without_its_repository_digest_says_to_name_it_by_id() -> None:
    """Same ID as the digest named, but no repository digest: docker_container (pull: never) would not find it."""
    loaded = [{"id": DSPARK_DIGEST, "tags": [], "digests": []}]
    _result, line = image_lines(f"{DSPARK}@{DSPARK_DIGEST}", nodes_with(IMAGES, **{"spark-w1": loaded}))
    assert line["status"] == "FAIL"
    assert line["message"] == (
        f"{DSPARK}@{DSPARK_DIGEST} is not on this node as named: image {DSPARK_DIGEST} is here, but without the "
        f"repository digest {DSPARK}@{DSPARK_DIGEST}, which is what docker_container looks for (repository digests "
        "come from a registry, by a pull or a push); name the image by its ID alone "
        f"({DSPARK_DIGEST}) in the profile"
    )


def test_an_image_named_by_id() -> None:
    _result, line = image_lines(SPARK_DS41F_ID, nodes_with(IMAGES))
    assert (line["status"], line["message"]) == ("PASS", f"image {SPARK_DS41F_ID} is here (spark-ds41f:1030)")
    _result, line = image_lines(OTHER, nodes_with(IMAGES))
    assert (line["status"], line["message"]) == (
        "FAIL",
        f"image {OTHER} is not on this node (a boot never pulls): playbooks/images.yml -e "
        "images_profile=true streams it from the head",
    )


def test_the_release_records_the_id_of_an_image_named_by_digest() -> None:
    plan = plan_with({"container/image": f"{DSPARK}@{DSPARK_DIGEST}"})
    assert image_ids(plan, nodes_with(IMAGES)) == dict.fromkeys(HOSTS, DSPARK_ID)


# ---------------------------------------------------------------- an image named by tag: a warning of the plan
def _pin_warnings(image: str, **hosts: dict[str, Any]) -> list[str]:
    from ansible_collections.dgxspark.cluster.tests.unit.plugins.plugin_utils.test__plan import cluster

    profile = validate_profile(edited(read(SPARK3), {"container/image": image}), "p.json")
    planned = build_plan(profile, "tp3-triangle", cluster(3, **hosts))
    return [w for w in planned["warnings"] if "the image is named by tag" in w]


def test_a_shipped_real_cluster_profile_names_its_image_by_tag_and_the_plan_says_so() -> None:
    """spark3 and spark8 name a locally built image (spark-ds41f:1030) that has no registry digest to show: the
    plan warns, naming the tag and how to pin it."""
    for path in (SPARK3, SPARK8):
        image = read(path)["container"]["image"]
        assert parse_reference(image).digest is None, image
    (warning,) = _pin_warnings(read(SPARK3)["container"]["image"])
    assert "spark-ds41f:1030" in warning and "name@sha256:<digest>" in warning and "dgxspark_image_by_tag" in warning


@pytest.mark.parametrize("image", ["spark-ds41f", "nvcr.io/nvidia/vllm:25.11-py3"])
def test_any_tag_only_image_is_warned_of(image: str) -> None:
    assert len(_pin_warnings(image)) == 1


@pytest.mark.parametrize("image", [f"{DSPARK}@{DSPARK_DIGEST}", DSPARK_ID])
def test_an_image_by_digest_or_id_is_not(image: str) -> None:
    assert _pin_warnings(image) == []


def test_an_inventory_that_says_why_it_uses_a_tag_is_not_warned() -> None:
    reason = {"image_by_tag": "built locally by make sim-up"}
    assert _pin_warnings("dgxspark-sim/engine:latest", **{"spark-head": reason}) == []


def test_the_sim_inventories_say_why_and_the_real_ones_do_not() -> None:
    import yaml

    from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import IMAGE_BY_TAG_VAR
    from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT

    for name in ("sim3", "sim4", "sim8", "fleet", "spark3", "spark8"):
        said = yaml.safe_load((ROOT / "inventories" / name / "group_vars" / "dgxspark.yml").read_text())
        assert bool(said.get(IMAGE_BY_TAG_VAR)) is (not name.startswith("spark")), name
