"""The voter listener's configuration: Kafka's property names, what is refused, and the CLI around it."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest
from service_helpers import CLUSTER

from kraftlake.cli import main as cli_main
from kraftlake.protocol.rpc import ApiKey
from kraftlake.service import NodeConfig, RaftService
from kraftlake.service.authorizer import authorizer_from_properties
from kraftlake.service.errors import ServiceError
from kraftlake.service.rpc_common import APPEND_API_KEY
from kraftlake.wire.errors import SecurityConfigError
from kraftlake.wire.listener_config import parse_listener_properties, principal_of_certificate
from kraftlake.wire.sasl import ScramMechanism
from kraftlake.wire.sasl_server import ScramCredential, ScramServer

SCRAM_JAAS = (
    "listener.name.controller.scram-sha-256.sasl.jaas.config="
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
)


def test_a_scram_password_in_clear_is_refused_and_a_stored_credential_authenticates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = "listener.security.protocol.map=CONTROLLER:SASL_PLAINTEXT\nsasl.enabled.mechanisms=SCRAM-SHA-256\n"
    with pytest.raises(SecurityConfigError, match="stored salted"):
        parse_listener_properties(base + SCRAM_JAAS + 'user_alice="alice-secret";\n')
    (tmp_path / "pw").write_text("alice-secret\n")
    assert (
        cli_main(
            [
                "quorum",
                "scram-credential",
                "--mechanism",
                "SCRAM-SHA-256",
                "--user",
                "alice",
                "--password-file",
                str(tmp_path / "pw"),
            ]
        )
        == 0
    )
    line = capsys.readouterr().out.strip()
    assert line.startswith('user_alice="salt=') and "alice-secret" not in line
    listener = parse_listener_properties(base + SCRAM_JAAS + line + ";\n")
    credential = listener.scram_credentials["SCRAM-SHA-256"]["alice"]
    assert (
        credential.iterations == 8192
        and ScramCredential.parse(credential.to_string(), source="", property="") == credential
    )
    client, server = (
        ScramMechanism("SHA-256", "alice", "alice-secret"),
        ScramServer("SCRAM-SHA-256", {"alice": credential}),
    )
    token: bytes | None = client.initial_response()
    while token is not None:
        token = client.respond(server.respond(token))
    assert client.complete and server.complete and server.username == "alice"


@pytest.mark.parametrize(
    ("text", "property_"),
    [
        ("listener.security.protocol.map=CONTROLLER:SSL\n", "ssl.keystore.location"),
        (
            "listener.security.protocol.map=CONTROLLER:SASL_SSL\nssl.keystore.location=/nonexistent\n",
            "sasl.enabled.mechanisms",
        ),
        (
            "listener.security.protocol.map=CONTROLLER:SASL_PLAINTEXT\nsasl.enabled.mechanisms=PLAIN\n",
            "listener.name.controller.plain.sasl.jaas.config",
        ),
        (
            "listener.security.protocol.map=CONTROLLER:SASL_PLAINTEXT\nsasl.enabled.mechanisms=GSSAPI\n",
            "sasl.enabled.mechanisms",
        ),
        ("listener.security.protocol.map=BROKER:SSL\n", "listener.security.protocol.map"),
        ("ssl.client.auth=required\n", "ssl.client.auth"),
    ],
)
def test_incomplete_listener_configs_name_the_property(text: str, property_: str) -> None:
    with pytest.raises(SecurityConfigError) as refused:
        parse_listener_properties(text)
    assert refused.value.property == property_


def test_acls_follow_kafkas_implications_and_need_an_authorizer() -> None:
    with pytest.raises(ServiceError, match=r"authorizer\.class\.name"):
        authorizer_from_properties({"super.users": "User:admin"}, "<p>")
    authorizer = authorizer_from_properties(
        {
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin;User:CN=voter,O=kraftlake",
            "kraftlake.acl.cluster.Alter": "User:ops",
            "kraftlake.acl.cluster.Describe": "User:*",
        },
        "<p>",
    )
    assert authorizer.allows("User:CN=voter,O=kraftlake", ApiKey.VOTE)
    assert not authorizer.allows("User:ops", ApiKey.FETCH)  # ALTER does not imply CLUSTER_ACTION
    assert authorizer.allows("User:ops", ApiKey.DESCRIBE_QUORUM) and authorizer.allows(
        "User:ops", APPEND_API_KEY
    )
    assert authorizer.allows("User:anyone", ApiKey.DESCRIBE_QUORUM)
    assert not authorizer.allows("User:anyone", ApiKey.DESCRIBE_CLUSTER)  # ALTER on a controller, as Kafka's
    assert authorizer.allows("User:anyone", ApiKey.API_VERSIONS)


def test_the_principal_of_a_certificate_is_its_rfc_2253_subject() -> None:
    subject = ((("countryName", "US"),), (("organizationName", "Acme, Inc."),), (("commonName", "voter-1"),))
    assert principal_of_certificate({"subject": subject}) == "User:CN=voter-1,O=Acme\\, Inc.,C=US"
    assert principal_of_certificate(None) == "User:ANONYMOUS"


def test_plaintext_on_a_non_loopback_address_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service = RaftService(NodeConfig(1, {1: ("0.0.0.0", 0)}, tmp_path / "n1", CLUSTER, fsync=False))
    try:
        with pytest.raises(ServiceError, match="PLAINTEXT"):
            service.bind()
    finally:
        service.stop()
    threads = set(threading.enumerate())
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:  # `quorum start` installs its own stop handlers first
        assert (
            cli_main(
                [
                    "quorum",
                    "start",
                    "--node-id",
                    "1",
                    "--voters",
                    "1@0.0.0.0:0",
                    "--data-dir",
                    str(tmp_path / "n1"),
                    "--quiet",
                ]
            )
            == 2
        )
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "--listener-config" in error and "--allow-plaintext" in error
    # the refused service's loop thread is stopped, not left running in the process
    assert [t.name for t in set(threading.enumerate()) - threads if t.is_alive()] == []
