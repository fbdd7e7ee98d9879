"""Issue 16, authenticated voters: a 3-voter SASL_SSL quorum with StandardAuthorizer-style ACLs.

One quorum for the module (voters log in to each other with SASL PLAIN over TLS; clients use SCRAM-SHA-512):
it elects, commits and replicates; each attack of the issue is refused and the quorum goes on (the epoch stays
put, appends commit); Kafka's own ``kafka-metadata-quorum`` describes it over SASL_SSL.
"""

from __future__ import annotations

import pickle
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from service_helpers import CLUSTER, fast_config, wait_until_committed
from tls_certs import make_ca, make_cert

from kraftlake.cli import main as cli_main
from kraftlake.protocol.error_codes import Errors
from kraftlake.protocol.rpc import ApiKey
from kraftlake.raft.messages import BeginQuorumEpochRequest, FetchRequest, Message, VoteRequest
from kraftlake.service import LocalQuorum, ObserverClient, QuorumClient
from kraftlake.service.errors import AppendNotAuthorizedError, RemoteError
from kraftlake.service.kafka_rpc import encode_raft_request, kafka_request
from kraftlake.service.rpc_common import WireContext
from kraftlake.wire.client_config import ClientSecurity, parse_client_properties
from kraftlake.wire.connection import KafkaConnection
from kraftlake.wire.errors import AuthenticationError
from kraftlake.wire.listener_config import ListenerSecurity, load_listener_properties
from kraftlake.wire.sasl_server import scram_credential

PASSWORDS = {
    "voter": "voter-secret",
    "alice": "alice-secret",
    "observer": "observer-secret",
    "appender": "appender-secret",
}


class Secured:
    """The module's quorum and what its clients need."""

    def __init__(self, quorum: LocalQuorum, ca: Path, folder: Path) -> None:
        self.quorum = quorum
        self.ca = ca
        self.folder = folder

    def client(
        self, user: str, password: str | None = None, mechanism: str = "SCRAM-SHA-512"
    ) -> ClientSecurity:
        return client_security(self.ca, user, PASSWORDS[user] if password is None else password, mechanism)

    def endpoint(self, node_id: int) -> tuple[str, int]:
        return self.quorum.endpoints[node_id]


def client_security(ca: Path, user: str, password: str, mechanism: str) -> ClientSecurity:
    """Kafka's client properties of `user` (what ``--command-config`` holds)."""
    module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
    return parse_client_properties(
        f"security.protocol=SASL_SSL\nsasl.mechanism={mechanism}\n"
        f'sasl.jaas.config=org.apache.kafka.common.security.{module} required username="{user}" '
        f'password="{password}";\nssl.truststore.type=PEM\nssl.truststore.location={ca}\n',
        f"<{user}>",
    )


def listener_properties(folder: Path, ca: Path, keystore: Path) -> ListenerSecurity:
    scram = " ".join(
        f'user_{u}="{scram_credential("SCRAM-SHA-512", p).to_string()}"'
        for u, p in PASSWORDS.items()
        if u != "voter"
    )
    path = folder / "listener.properties"
    path.write_text(
        "listener.security.protocol.map=CONTROLLER:SASL_SSL\n"
        f"ssl.keystore.type=PEM\nssl.keystore.location={keystore}\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={ca}\n"
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512\n"
        "listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
        f'required user_voter="{PASSWORDS["voter"]}" user_alice="{PASSWORDS["alice"]}";\n'
        "listener.name.controller.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram."
        f"ScramLoginModule required {scram};\n"
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "super.users=User:voter\n"
        "kraftlake.acl.cluster.ClusterAction=User:observer\n"
        "kraftlake.acl.cluster.Describe=User:alice\n"
        "kraftlake.acl.cluster.Alter=User:appender\n"
    )
    return load_listener_properties(path)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    folder = tmp_path_factory.mktemp("sasl-ssl")
    ca = make_ca(folder, "ca")
    keystore = make_cert(folder, "ca", "voter", "/O=kraftlake/CN=voter")
    listener = listener_properties(folder, ca, keystore)
    quorum = LocalQuorum(
        3,
        folder / "q",
        CLUSTER,
        fsync=False,
        quorum=fast_config(),
        listener_security=listener,
        security=client_security(ca, "voter", PASSWORDS["voter"], "PLAIN"),
    )
    try:
        yield Secured(quorum.start(), ca, folder)
    finally:
        quorum.stop()


def _ctx(secured: Secured, node_id: int) -> WireContext:
    return WireContext(CLUSTER, node_id, "", dict(secured.quorum.endpoints))


def _recv_all(sock: socket.socket) -> bytes:
    out = b""
    sock.settimeout(5)
    try:
        while chunk := sock.recv(65536):
            out += chunk
    except (ConnectionError, ssl.SSLError):
        pass
    return out


def test_a_sasl_ssl_quorum_elects_commits_and_replicates(secured: Secured) -> None:
    q = secured.quorum
    leader = q.wait_for_leader()
    end = 0
    for i in range(10):
        end = leader.append([b"rec-%d-%d" % (i, k) for k in range(3)]).result(10)[1] + 1
    wait_until_committed(q, end)
    # a client with ALTER and the append credential appends; with DESCRIBE only it describes the quorum
    appender = QuorumClient(
        [secured.endpoint(1)],
        CLUSTER,
        append_secret=q.append_secret_path,
        security=secured.client("appender"),
    )
    base, last = appender.append_retrying([b"x", b"y"])
    assert last == base + 1 and base >= end
    appender.close()
    described, from_leader = QuorumClient(
        [secured.endpoint(2)], CLUSTER, security=secured.client("appender")
    ).describe()
    assert from_leader and described.leader_id == q.wait_for_leader().node_id


def _spoofs(secured: Secured, target: int, epoch: int) -> list[Message]:
    """The issue's attack: Votes and a BeginQuorumEpoch in voter 3's (or 2's) name, epochs far ahead."""
    claimed = 3 if target != 3 else 2
    return [
        VoteRequest(claimed, target, 1, epoch + 100, claimed, epoch, 10**6, False),
        VoteRequest(claimed, target, 2, epoch + 100, claimed, epoch, 10**6, True),
        BeginQuorumEpochRequest(claimed, target, 3, epoch + 200, claimed),
    ]


def test_unauthenticated_votes_in_a_voters_name_are_refused_and_the_quorum_goes_on(secured: Secured) -> None:
    q = secured.quorum
    leader = q.wait_for_leader()
    epoch, before = leader.epoch, leader.append([b"before"]).result(10)
    tls = ssl.create_default_context(cafile=str(secured.ca))
    for node_id in q.endpoints:
        port = secured.endpoint(node_id)[1]
        for spoof in _spoofs(secured, node_id, epoch):
            _, _, frame = encode_raft_request(spoof, 7, _ctx(secured, spoof.src))
            # plain TCP: the TLS listener never reads it as a request
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(frame)
                answer = _recv_all(sock)
            assert answer[:1] in (b"", b"\x15")  # nothing, or a TLS alert: never a Kafka response
            # TLS, but no SASL: Kafka's rule, anything but ApiVersions and the handshake closes the connection
            with tls.wrap_socket(
                socket.create_connection(("127.0.0.1", port), timeout=5), server_hostname="127.0.0.1"
            ) as sock:
                sock.sendall(frame)
                assert _recv_all(sock) == b""
    after = leader.append([b"after"]).result(10)
    assert after[0] > before[1]
    assert leader.is_leader and leader.epoch == epoch
    assert all(s.epoch == epoch for s in q.services.values())


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_a_wrong_password_is_an_authentication_error_naming_the_mechanism(
    secured: Secured, mechanism: str
) -> None:
    client = ObserverClient(
        [secured.endpoint(1)], CLUSTER, security=secured.client("alice", "wrong", mechanism)
    )
    with pytest.raises(AuthenticationError) as failure:
        client.fetch(0, max_wait_ms=0)
    assert failure.value.mechanism == mechanism and "alice-secret" not in str(failure.value)
    with pytest.raises(AuthenticationError, match=mechanism):
        KafkaConnection(*secured.endpoint(2), secured.client("alice", "wrong", mechanism)).open()


def test_a_principal_without_cluster_action_gets_31_for_vote_and_fetch(secured: Secured) -> None:
    q = secured.quorum
    leader = q.wait_for_leader()
    epoch = leader.epoch
    target = next(i for i in q.endpoints if i != leader.node_id)
    fetch = FetchRequest(3 if target != 3 else 2, target, 9, epoch, 0, 0, 0, 100, "")
    with KafkaConnection(*secured.endpoint(target), secured.client("alice")) as conn:
        for request in (*_spoofs(secured, target, epoch), fetch):
            api_key, _, body = kafka_request(request, _ctx(secured, request.src))
            answer: Any = conn.request(api_key, body)
            assert answer.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
            assert CLUSTER not in repr(answer)
    observer = ObserverClient([secured.endpoint(target)], CLUSTER, security=secured.client("alice"))
    with pytest.raises(RemoteError) as refused:
        observer.fetch(0, max_wait_ms=0)
    assert refused.value.code == Errors.CLUSTER_AUTHORIZATION_FAILED
    # DESCRIBE is not ALTER: no append, even with the credential
    with pytest.raises(AppendNotAuthorizedError):
        QuorumClient(
            [secured.endpoint(leader.node_id)],
            CLUSTER,
            append_secret=q.append_secret_path,
            security=secured.client("alice"),
        ).append([b"no"])
    assert leader.is_leader and leader.epoch == epoch
    leader.append([b"still committing"]).result(10)


def test_an_observer_with_cluster_action_follows(secured: Secured) -> None:
    q = secured.quorum
    leader = q.wait_for_leader()
    last = leader.append([b"for-the-observer-%d" % i for i in range(5)]).result(10)[1]
    # pickled as Spark ships it to an executor: the security settings travel with it
    observer = pickle.loads(
        pickle.dumps(
            ObserverClient(
                [secured.endpoint(i) for i in q.endpoints], CLUSTER, security=secured.client("observer")
            )
        )
    )
    got: list[bytes] = []
    offset = 0
    deadline = time.monotonic() + 10
    while offset <= last and time.monotonic() < deadline:
        entries = observer.fetch(offset, max_wait_ms=100)
        got += [e.value for e in entries if not e.is_control]
        offset = entries[-1].offset + 1 if entries else offset
    observer.close()
    assert got[-5:] == [b"for-the-observer-%d" % i for i in range(5)]
    assert [e.value for e in leader.read_committed(0, 10_000) if not e.is_control][: len(got)] == got


def test_a_sasl_listener_offers_the_handshake_in_api_versions(secured: Secured) -> None:
    with KafkaConnection(*secured.endpoint(1), secured.client("alice")) as conn:
        assert conn.versions[ApiKey.SASL_HANDSHAKE] == 1 and conn.versions[ApiKey.SASL_AUTHENTICATE] == 2
    # before authenticating, a frame larger than Kafka's sasl.server.max.receive.size (512 KiB) is not read
    tls = ssl.create_default_context(cafile=str(secured.ca))
    with tls.wrap_socket(
        socket.create_connection(secured.endpoint(1), timeout=5), server_hostname="127.0.0.1"
    ) as sock:
        sock.sendall(struct.pack(">ihhi", 1 << 20, ApiKey.SASL_HANDSHAKE, 1, 5))
        answer = _recv_all(sock)
    assert answer[4:8] == struct.pack(">i", 5) and b"exceeds the maximum of 524288" in answer


def test_quorum_describe_and_append_take_a_command_config(
    secured: Secured, capsys: pytest.CaptureFixture[str]
) -> None:
    config = secured.folder / "appender.properties"
    config.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="appender" password="{PASSWORDS["appender"]}";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={secured.ca}\n"
    )
    bootstrap = f"127.0.0.1:{secured.endpoint(1)[1]}"
    common = ["--bootstrap", bootstrap, "--cluster-id", CLUSTER, "--command-config", str(config)]
    assert (
        cli_main(
            [
                "quorum",
                "append",
                *common,
                "--append-secret",
                str(secured.quorum.append_secret_path),
                "from-the-cli",
            ]
        )
        == 0
    )
    assert "committed at offsets" in capsys.readouterr().out
    assert cli_main(["quorum", "describe", *common]) == 0
    status = {
        k.strip(): v.strip() for k, v in (line.split(":", 1) for line in capsys.readouterr().out.splitlines())
    }
    assert status["ClusterId"] == CLUSTER and status["LeaderId"] == str(
        secured.quorum.wait_for_leader().node_id
    )
    assert (
        cli_main(["quorum", "describe", "--bootstrap", bootstrap, "--cluster-id", CLUSTER]) == 2
    )  # PLAINTEXT


@pytest.mark.kafka
def test_kafka_metadata_quorum_describes_a_sasl_ssl_kraftlake_quorum(secured: Secured) -> None:
    from kraftlake.kafka_tools import run_class

    leader = secured.quorum.wait_for_leader()
    follower = next(i for i in secured.quorum.endpoints if i != leader.node_id)
    config = secured.folder / "appender-client.properties"
    config.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="appender" password="{PASSWORDS["appender"]}";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={secured.ca}\n"
    )
    status = run_class(
        "org.apache.kafka.tools.MetadataQuorumCommand",
        [
            "--bootstrap-controller",
            f"127.0.0.1:{secured.endpoint(follower)[1]}",
            "--command-config",
            str(config),
            "describe",
            "--status",
        ],
        timeout=120,
    )
    fields = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in status.strip().splitlines())}
    assert fields["ClusterId"] == CLUSTER and fields["LeaderId"] == str(leader.node_id)
    assert fields["LeaderEpoch"] == str(leader.epoch)


def test_no_epoch_near_the_int32_ceiling_is_adopted_from_a_voters_principal(secured: Secured) -> None:
    """Issue 25: every epoch from 2^31-16 to 2^31-1 by Vote and by BeginQuorumEpoch, sent as the voters'
    own principal (a super user): refused with INVALID_REQUEST, the epoch stays and commits go on."""
    q = secured.quorum
    leader = q.wait_for_leader()
    epoch, before = leader.epoch, leader.append([b"before"]).result(10)
    for node_id in q.endpoints:
        claimed = node_id % 3 + 1
        ctx = WireContext(CLUSTER, claimed, q.services[claimed].runner.directory_id, dict(q.endpoints))
        with KafkaConnection(*secured.endpoint(node_id), secured.client("voter", mechanism="PLAIN")) as conn:
            for spoofed in range(2**31 - 16, 2**31):
                for request in (
                    BeginQuorumEpochRequest(claimed, node_id, 1, spoofed, claimed),
                    VoteRequest(claimed, node_id, 2, spoofed, claimed, spoofed - 1, 10**9, False),
                ):
                    api_key, _, body = kafka_request(request, ctx)
                    answer: Any = conn.request(api_key, body)
                    codes = {answer.error_code} | {p.error_code for t in answer.topics for p in t.partitions}
                    assert Errors.INVALID_REQUEST in codes
    after = leader.append([b"after"]).result(10)
    assert after[0] > before[1] and leader.is_leader
    assert all(s.epoch == epoch for s in q.services.values())


def test_an_observer_principal_cannot_speak_for_a_voter(secured: Secured) -> None:
    """Issue 25: ClusterAction lets the observer fetch, never in a voter's name (its Fetch would count)."""
    q = secured.quorum
    leader = q.wait_for_leader()
    epoch, end = leader.epoch, leader.append([b"x"]).result(10)[1] + 1
    follower = next(i for i in q.endpoints if i != leader.node_id)
    ctx = WireContext(CLUSTER, follower, q.services[follower].runner.directory_id, dict(q.endpoints))
    requests: list[Message] = [
        FetchRequest(follower, leader.node_id, 1, epoch, follower, end + 10, epoch, 0, ctx.directory_id),
        VoteRequest(follower, leader.node_id, 2, epoch + 1, follower, epoch, end, False),
        BeginQuorumEpochRequest(follower, leader.node_id, 3, epoch + 1, follower),
    ]
    with KafkaConnection(*secured.endpoint(leader.node_id), secured.client("observer")) as conn:
        for request in requests:
            api_key, _, body = kafka_request(request, ctx)
            answer: Any = conn.request(api_key, body)
            assert answer.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
    assert leader.is_leader and leader.epoch == epoch
    leader.append([b"still committing"]).result(10)


def test_voter_principals_bind_ids_or_fall_back_to_super_users() -> None:
    from kraftlake.service.authorizer import voter_principals_from_properties
    from kraftlake.service.errors import ServiceError

    voters = frozenset({1, 2, 3})
    auth = {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    }
    bound = voter_principals_from_properties(
        {
            **auth,
            "kraftlake.voter.principal.1": "User:CN=voter-1,O=k",
            "kraftlake.voter.principal.2": "User:v2",
        },
        "<props>",
        voters,
    )
    assert bound.may_speak_for("User:CN=voter-1,O=k", 1) and not bound.may_speak_for("User:CN=voter-1,O=k", 2)
    assert not bound.may_speak_for("User:admin", 3)  # bindings given: only they speak for voters
    fallback = voter_principals_from_properties(auth, "<props>", voters)
    assert fallback.may_speak_for("User:admin", 3) and not fallback.may_speak_for("User:observer", 3)
    assert voter_principals_from_properties({}, "<props>", voters).may_speak_for("User:anyone", 1)
    with pytest.raises(ServiceError, match="not a voter"):
        voter_principals_from_properties({"kraftlake.voter.principal.9": "User:x"}, "<props>", voters)


def test_a_connection_that_does_not_authenticate_is_closed_and_authenticated_ones_get_in(
    tmp_path: Path,
) -> None:
    """Issue 25: 200 TLS connections that never authenticated held every slot for good."""
    ca = make_ca(tmp_path, "ca")
    listener = listener_properties(tmp_path, ca, make_cert(tmp_path, "ca", "voter", "/O=kraftlake/CN=voter"))
    quorum = LocalQuorum(
        1,
        tmp_path / "q",
        CLUSTER,
        fsync=False,
        quorum=fast_config(1),
        listener_security=listener,
        security=client_security(ca, "voter", PASSWORDS["voter"], "PLAIN"),
        node_options={"sasl_handshake_timeout_ms": 600, "max_connections": 8, "reserved_connections": 4},
    )
    quorum.start()
    try:
        leader = quorum.wait_for_leader()
        tls = ssl.create_default_context(cafile=str(ca))
        held = [
            tls.wrap_socket(
                socket.create_connection(quorum.endpoints[1], timeout=5), server_hostname="127.0.0.1"
            )
            for _ in range(12)
        ]
        observer = ObserverClient(
            [quorum.endpoints[1]],
            CLUSTER,
            security=client_security(ca, "observer", PASSWORDS["observer"], "SCRAM-SHA-512"),
        )
        observer.fetch(0, max_wait_ms=0)  # got in past the 12 unauthenticated ones
        started = time.monotonic()
        for sock in held:
            assert _recv_all(sock) == b""  # closed by the voter, unauthenticated
            sock.close()
        assert time.monotonic() - started < 4
        observer.fetch(0, max_wait_ms=0)  # authenticated: not closed with them
        observer.close()
        leader.append([b"still committing"]).result(10)
    finally:
        quorum.stop()
