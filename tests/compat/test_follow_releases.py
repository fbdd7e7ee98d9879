"""`kraftlake follow` against a single-node KRaft Kafka of each release in the matrix with a static (``controller.quorum.voters``) quorum, from
that release's own jars: the checks of `compat.follow_checks.check_follow`, on a log with every entity kind the release writes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from compat.follow_checks import check_follow, single_node_fixture
from compat.matrix import RELEASES_ENV, SUBSET
from compat.warehouse_checks import check_warehouse, copy_log
from peers.kafka_release import ReleaseCluster

from kraftlake.image import image_at

pytestmark = [pytest.mark.kafka, pytest.mark.compat, pytest.mark.slow]

cluster = single_node_fixture("static")


def test_follow_installs_the_snapshot_and_mirrors_the_log(cluster: ReleaseCluster, tmp_path: Path) -> None:
    check_follow(cluster, tmp_path)


def test_warehouse_states_equal_the_image(
    cluster: ReleaseCluster, warehouse_spark: object, tmp_path: Path
) -> None:
    """The release's log ingested: ``<entity>_at(N)`` equals the image at sampled offsets, the end among them.
    The subset (no ``$KRAFTLAKE_COMPAT_RELEASES``) runs it for its oldest and its newest release (each costs a Delta ingest),
    ``make compat`` for every release."""
    if not os.environ.get(RELEASES_ENV) and cluster.release.version not in (SUBSET[0], SUBSET[-1]):
        pytest.skip(f"the subset ingests {SUBSET[0]} and {SUBSET[-1]}; make compat every release")
    offsets = check_warehouse(warehouse_spark, cluster.node(1).metadata_dir, tmp_path)
    assert len(offsets) >= 3
    # the comparison covered a delegation token where the release writes one
    tokens = image_at(tmp_path / "log", offsets[-1]).delegation_tokens
    assert len(tokens) == (1 if cluster.release.delegation_tokens_in_kraft else 0)


def test_the_delegation_token_is_the_one_kafka_created(cluster: ReleaseCluster, tmp_path: Path) -> None:
    """The token ``kafka-delegation-tokens --create`` printed is the image's, owned and requested by the SCRAM
    user (the image against the shell: `check_follow`)."""
    release = cluster.release
    if not release.delegation_tokens_in_kraft:
        pytest.skip(
            f"Kafka {release.version} keeps delegation tokens out of the metadata log (KRaft stores them from 3.6)"
        )
    image = image_at(copy_log(cluster.node(1).metadata_dir, tmp_path / "log"))
    (token,) = image.delegation_tokens.values()
    assert token.token_id in cluster.token_output
    assert (token.owner, token.requester) == ("User:alice", "User:alice")
    assert token.issue_timestamp < token.expiration_timestamp <= token.max_timestamp
