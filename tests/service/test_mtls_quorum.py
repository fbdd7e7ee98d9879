"""Issue 16, authenticated voters: a 3-voter mutual-TLS quorum (``ssl.client.auth=required``), principals taken
from client certificates as Kafka's default principal builder takes them (``User:CN=voter,O=kraftlake``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from service_helpers import CLUSTER, fast_config, wait_until_committed
from tls_certs import make_ca, make_cert

from kraftlake.protocol.error_codes import Errors
from kraftlake.raft.messages import FetchRequest, VoteRequest
from kraftlake.service import LocalQuorum, ObserverClient
from kraftlake.service.errors import RemoteError
from kraftlake.service.kafka_rpc import kafka_request
from kraftlake.service.rpc_common import WireContext
from kraftlake.wire.client_config import ClientSecurity, parse_client_properties
from kraftlake.wire.connection import KafkaConnection
from kraftlake.wire.errors import PeerError, TlsError
from kraftlake.wire.listener_config import load_listener_properties

VOTER = "User:CN=voter,O=kraftlake"


def client(ca: Path, keystore: Path | None) -> ClientSecurity:
    store = f"ssl.keystore.type=PEM\nssl.keystore.location={keystore}\n" if keystore is not None else ""
    return parse_client_properties(
        f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={ca}\n{store}",
        f"<{keystore}>",
    )


class Mtls:
    def __init__(self, quorum: LocalQuorum, ca: Path, folder: Path) -> None:
        self.quorum = quorum
        self.ca = ca
        self.folder = folder

    def client(self, name: str) -> ClientSecurity:
        return client(self.ca, self.folder / f"{name}.keystore.pem")


@pytest.fixture(scope="module")
def mtls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mtls]:
    folder = tmp_path_factory.mktemp("mtls")
    ca = make_ca(folder, "ca")
    voter = make_cert(folder, "ca", "voter", "/O=kraftlake/CN=voter")
    for name in ("observer", "reader"):
        make_cert(folder, "ca", name, f"/O=kraftlake/CN={name}")
    make_ca(folder, "rogue-ca")
    make_cert(folder, "rogue-ca", "rogue", "/O=kraftlake/CN=voter")  # the voters' very name, another CA
    path = folder / "listener.properties"
    path.write_text(
        "listener.security.protocol.map=CONTROLLER:SSL\nssl.client.auth=required\n"
        f"ssl.keystore.type=PEM\nssl.keystore.location={voter}\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={ca}\n"
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        f"super.users={VOTER}\n"
        "kraftlake.acl.cluster.CLUSTER_ACTION=User:CN=observer,O=kraftlake\n"
        "kraftlake.acl.cluster.describe=User:CN=reader,O=kraftlake\n"
    )
    quorum = LocalQuorum(
        3,
        folder / "q",
        CLUSTER,
        fsync=False,
        quorum=fast_config(),
        listener_security=load_listener_properties(path),
        security=client(ca, voter),
    )
    try:
        yield Mtls(quorum.start(), ca, folder)
    finally:
        quorum.stop()


def test_an_mtls_quorum_elects_commits_replicates_and_serves_an_observer(mtls: Mtls) -> None:
    q = mtls.quorum
    leader = q.wait_for_leader()
    last = 0
    for i in range(10):
        last = leader.append([b"m-%d" % i]).result(10)[1]
    wait_until_committed(q, last + 1)
    deadline = time.monotonic() + 10
    observer = ObserverClient(
        [q.endpoints[i] for i in q.endpoints], CLUSTER, security=mtls.client("observer")
    )
    got: list[bytes] = []
    offset = 0
    while offset <= last and time.monotonic() < deadline:
        entries = observer.fetch(offset, max_wait_ms=100)
        got += [e.value for e in entries if not e.is_control]
        offset = entries[-1].offset + 1 if entries else offset
    observer.close()
    assert got[:10] == [b"m-%d" % i for i in range(10)]


def test_a_certificate_of_another_ca_or_none_fails_the_handshake(mtls: Mtls) -> None:
    leader = mtls.quorum.wait_for_leader()
    epoch = leader.epoch
    host, port = mtls.quorum.endpoints[leader.node_id]
    rogue = client(mtls.ca, mtls.folder / "rogue.keystore.pem")
    for security in (rogue, client(mtls.ca, None)):
        # TLS 1.3 sends the client certificate after the client's handshake ends: the server's refusal comes
        # as an alert on the first read (TlsError) or as the connection closing (PeerError)
        with pytest.raises((TlsError, PeerError)):
            KafkaConnection(host, port, security, timeout_s=5).open()
    leader.append([b"after the strangers"]).result(10)
    assert leader.is_leader and leader.epoch == epoch


def test_a_certificate_without_cluster_action_gets_31_for_vote_and_fetch(mtls: Mtls) -> None:
    q = mtls.quorum
    leader = q.wait_for_leader()
    epoch = leader.epoch
    target = next(i for i in q.endpoints if i != leader.node_id)
    claimed = 3 if target != 3 else 2
    ctx = WireContext(CLUSTER, claimed, "", dict(q.endpoints))
    with KafkaConnection(*q.endpoints[target], mtls.client("reader")) as conn:
        for request in (
            VoteRequest(claimed, target, 1, epoch + 50, claimed, epoch, 10**6, False),
            FetchRequest(claimed, target, 2, epoch, 0, 0, 0, 100, ""),
        ):
            api_key, _, body = kafka_request(request, ctx)
            answer: Any = conn.request(api_key, body)
            assert answer.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
    with pytest.raises(RemoteError) as refused:
        ObserverClient([q.endpoints[target]], CLUSTER, security=mtls.client("reader")).fetch(0, max_wait_ms=0)
    assert refused.value.code == Errors.CLUSTER_AUTHORIZATION_FAILED
    assert leader.is_leader and leader.epoch == epoch
