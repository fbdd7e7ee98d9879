"""How a voter's outgoing channel to a peer proves who it is: the client side of TLS and SASL, on asyncio.

The voter connects with its ``--command-config`` (`kraftlake.wire.client_config.ClientSecurity`, what Kafka's
controllers get from ``sasl.mechanism.controller.protocol`` and their JAAS login): TLS by the client context it
builds (the peer's certificate checked against the truststore and, unless disabled, its host), then on a SASL
listener SaslHandshake v1 and SaslAuthenticate rounds driven by the same mechanisms as the blocking client
(`kraftlake.wire.sasl`). The peers are kraftlake voters, which serve these versions: no ApiVersions first.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
from typing import Any

from kraftlake.protocol import rpc, rpc_messages
from kraftlake.protocol.errors import ProtocolError
from kraftlake.protocol.rpc import ApiKey
from kraftlake.service.transport import read_frame
from kraftlake.wire.client_config import ClientSecurity
from kraftlake.wire.errors import AuthenticationError
from kraftlake.wire.sasl import mechanism_for

SASL_HANDSHAKE_VERSION = 1
SASL_AUTHENTICATE_VERSION = 2
_MAX_AUTH_FRAME = 1 << 20  # a SASL answer is a few hundred bytes


def client_tls(security: ClientSecurity | None) -> ssl.SSLContext | None:
    """The TLS client context of `security` (None: plaintext)."""
    return security.ssl_context() if security is not None else None


async def sasl_login(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    security: ClientSecurity,
    peer: str,
    client_id: str,
) -> None:
    """Authenticate a fresh connection with `security`'s mechanism and credentials.

    Raises
    ------
    AuthenticationError
        The peer refused the mechanism or the credentials, or did not answer as a SASL listener does (the
        connection is then useless: the caller closes it).
    """
    mechanism = mechanism_for(security)
    name = mechanism.mechanism_name
    corr = 0

    async def exchange(api_key: int, version: int, body: Any) -> Any:
        nonlocal corr
        corr += 1
        writer.write(rpc.encode_request(body, version, corr, client_id))
        try:
            payload = await read_frame(reader, _MAX_AUTH_FRAME)
            got, answer = rpc.decode_response(payload, api_key, version)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            raise AuthenticationError(
                name,
                f"{peer} closed the connection during the SASL exchange "
                "(is its listener SASL_PLAINTEXT or SASL_SSL?)",
            ) from exc
        except (ProtocolError, struct.error) as exc:
            raise AuthenticationError(
                name, f"{peer} did not answer the SASL exchange as a SASL listener does: {exc}"
            ) from exc
        if got != corr:
            raise AuthenticationError(name, f"{peer} answered correlation id {got}, expected {corr}")
        return answer

    handshake = await exchange(
        ApiKey.SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION, rpc_messages.SaslHandshakeRequest(mechanism=name)
    )
    if handshake.error_code:
        offered = ", ".join(handshake.mechanisms) or "none"
        raise AuthenticationError(
            name, f"{peer} does not enable it (it offers {offered}: check sasl.mechanism)"
        )
    token: bytes | None = mechanism.initial_response()
    while token is not None:
        answer = await exchange(
            ApiKey.SASL_AUTHENTICATE,
            SASL_AUTHENTICATE_VERSION,
            rpc_messages.SaslAuthenticateRequest(auth_bytes=token),
        )
        if answer.error_code:
            raise AuthenticationError(name, f"{peer}: {answer.error_message or answer.error_code}")
        token = mechanism.respond(answer.auth_bytes)
    if not mechanism.complete:
        raise AuthenticationError(name, f"{peer}: the exchange did not complete")
