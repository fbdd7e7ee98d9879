"""The multi-process Kafka cluster peer: a static 3-voter quorum that elects, fails over and takes SASL_SSL."""

from __future__ import annotations

import socket
import ssl
import subprocess
import time
from collections.abc import Iterator

import pytest

from peers.kafka_cluster import (
    FIRST_BROKER_ID,
    METADATA_QUORUM_COMMAND,
    TOPIC_COMMAND,
    KafkaCluster,
    KafkaPeerError,
    parse_status,
    run_tool,
)

pytestmark = pytest.mark.kafka

CONTROLLERS = (1, 2, 3)


@pytest.fixture(scope="module")
def plaintext_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with KafkaCluster(tmp_path_factory.mktemp("kafka-cluster")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def sasl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with KafkaCluster(tmp_path_factory.mktemp("kafka-cluster-sasl"), security="SASL_SSL") as cluster:
        yield cluster


def test_plaintext_cluster_elects_and_fails_over(plaintext_cluster: KafkaCluster) -> None:
    cluster = plaintext_cluster
    assert len(cluster.controller_endpoints) == 3
    assert cluster.bootstrap_controllers == ",".join(cluster.controller_endpoints)
    assert all(e.startswith("127.0.0.1:") for e in cluster.controller_endpoints)
    for node_id in (*CONTROLLERS, FIRST_BROKER_ID):
        assert (cluster.metadata_dir(node_id) / "quorum-state").exists()

    cluster.topics_create("smoke", partitions=3, replication_factor=1)
    assert "smoke" in cluster.topics_list()

    status = cluster.describe_status()
    assert status["ClusterId"] == cluster.cluster_id
    assert sorted(v["id"] for v in status["CurrentVoters"]) == list(CONTROLLERS)
    assert FIRST_BROKER_ID in [o["id"] for o in status["CurrentObservers"]]
    leader = cluster.leader_id()
    assert leader in CONTROLLERS

    cluster.kill(leader)  # SIGKILL
    assert not cluster.is_running(leader)
    new_leader = cluster.wait_for_leader(not_in=[leader], timeout=60)
    assert new_leader in CONTROLLERS and new_leader != leader
    assert cluster.describe_status()["LeaderEpoch"] > status["LeaderEpoch"]

    cluster.start_node(leader)
    assert cluster.is_running(leader)
    deadline = time.monotonic() + 60
    while True:  # the restarted voter catches up and is a follower again
        rows = [line.split() for line in cluster.describe_replication().splitlines()[1:] if line.strip()]
        me = next((r for r in rows if r[0] == str(leader)), None)
        if me is not None and me[-1] == "Follower" and me[3] == "0":
            break
        assert time.monotonic() < deadline, f"node {leader} did not rejoin as a follower: {rows}"
        time.sleep(0.5)
    assert "smoke" in cluster.topics_list()


def test_sasl_ssl_cluster_serves_kafkas_own_tools(sasl_cluster: KafkaCluster) -> None:
    cluster = sasl_cluster
    admin = cluster.admin_properties
    assert admin is not None and "security.protocol=SASL_SSL" in admin.read_text()

    # TopicCommand with the admin client properties, against the broker's SASL_SSL listener
    base = ["--bootstrap-server", cluster.bootstrap_servers, "--command-config", str(admin)]
    run_tool(TOPIC_COMMAND, [*base, "--create", "--topic", "secure", "--partitions", "2",
                             "--replication-factor", "1"])
    assert "secure" in run_tool(TOPIC_COMMAND, [*base, "--list"]).split()

    # kafka-metadata-quorum against one controller's SASL_SSL listener: PLAIN (admin.properties), and SCRAM,
    # whose credentials StorageTool format put in the log
    controller = cluster.controller_endpoints[0]
    for props in (admin, cluster.client_properties(cluster.admin_user, cluster.admin_password, "SCRAM-SHA-512")):
        status = parse_status(run_tool(METADATA_QUORUM_COMMAND, [
            "--bootstrap-controller", controller, "--command-config", str(props), "describe", "--status"]))
        assert status["LeaderId"] in CONTROLLERS
        assert status["ClusterId"] == cluster.cluster_id

    # a wrong password is refused
    wrong = cluster.client_properties(cluster.admin_user, "not-the-password", "SCRAM-SHA-256")
    with pytest.raises(KafkaPeerError, match="Authentication failed"):
        run_tool(TOPIC_COMMAND, ["--bootstrap-server", cluster.bootstrap_servers, "--command-config",
                                 str(wrong), "--list"])

    # a new SCRAM user, allowed ClusterAction (what fetching the metadata log from a controller needs)
    cluster.add_user("follower", "follower-secret", mechanisms=("SCRAM-SHA-256",))
    granted = cluster.grant_cluster_action("follower")  # AclCommand prints the cluster's ACLs after adding
    assert "principal=User:follower" in granted and "operation=CLUSTER_ACTION" in granted
    props = cluster.client_properties("follower", "follower-secret", "SCRAM-SHA-256")
    run_tool(TOPIC_COMMAND, ["--bootstrap-server", cluster.bootstrap_servers, "--command-config", str(props),
                             "--list"])  # authenticates (sees no topics: no Describe ACL)


def test_sasl_ssl_cluster_tls_files(sasl_cluster: KafkaCluster) -> None:
    cluster = sasl_cluster
    verify = subprocess.run(["openssl", "verify", "-CAfile", str(cluster.ca_pem), str(cluster.client_cert_pem)],
                            capture_output=True, text=True, check=False)
    assert verify.returncode == 0, verify.stderr
    # Python's ssl accepts the controller's certificate for 127.0.0.1 and presents the client certificate
    context = ssl.create_default_context(cafile=str(cluster.ca_pem))
    context.load_cert_chain(str(cluster.client_cert_pem), str(cluster.client_key_pem))
    host, port = cluster.controller_endpoints[0].split(":")
    with socket.create_connection((host, int(port)), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname=host) as tls:
        assert tls.version() is not None
        cert = tls.getpeercert()
        assert cert is not None
        assert set(cert["subjectAltName"]) == {("DNS", "localhost"), ("IP Address", "127.0.0.1")}
