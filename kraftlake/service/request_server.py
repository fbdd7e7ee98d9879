"""`RequestServer`: a voter's inbound connections and the requests read from them.

What it does with a connection: admission (`ConnectionTable`), TLS principal or the SASL exchange, frame size
limits, reading a connection only within its share of the unsent-reply budget. With a request: refusal of
what cannot be read or is not served, authorization, the voter identity checks, then the answer: ApiVersions,
DescribeCluster and DescribeQuorum here, the raft RPCs of voters through `RaftDriver.step_request`, observers'
Fetch and FetchSnapshot through `ObserverServer`, the append RPC (with the append credential) through
`RaftDriver.append`.

The voter identity checks take KIP-853's view of a replica: a voter is its id and its directory id. A voter
whose data directory was wiped comes back with a new directory id, and the others refuse it until they are
restarted knowing that id (or, where they pinned the first id seen in its name, restarted at all): to them it is
another replica, and its empty log must not count towards the high watermark.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import logging
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from kraftlake.follow.observer import METADATA_TOPIC
from kraftlake.protocol import rpc, rpc_messages
from kraftlake.protocol.errors import ProtocolError
from kraftlake.protocol.rpc import ApiKey
from kraftlake.raft.messages import Errors
from kraftlake.service.append_rpc import (
    AppendRequest,
    AppendResponse,
    decode_append_request,
    encode_append_response,
    encode_refusal,
)
from kraftlake.service.authenticator import SASL_SERVED, SaslHandshake
from kraftlake.service.authorizer import REFUSAL
from kraftlake.service.config import NodeConfig
from kraftlake.service.connections import ConnectionTable
from kraftlake.service.describe_quorum import CONTROLLER_ENDPOINT_TYPE, describe_quorum_response
from kraftlake.service.errors import CodecError, FrameTooLargeError, NotLeaderError, ServiceError
from kraftlake.service.kafka_rpc import encode_response, fetch_replica_id, raft_request, sender_directory_id
from kraftlake.service.limited_log import LimitedLog
from kraftlake.service.messages import QuorumDescription
from kraftlake.service.observer_server import ObserverServer
from kraftlake.service.raft_driver import RaftDriver
from kraftlake.service.response_bodies import error_response
from kraftlake.service.rpc_common import APPEND_API_KEY, SERVED, RequestRefused, check_cluster_id
from kraftlake.service.transport import InboundConnection, read_frame, serve
from kraftlake.wire.listener_config import ANONYMOUS, principal_of_certificate

log = logging.getLogger(__name__)

SASL_MAX_RECEIVE_BYTES = 512 * 1024
"""Kafka's ``sasl.server.max.receive.size``: the largest frame read before a connection has authenticated."""
_HEAD = struct.Struct(">hhi")  # api key, api version, correlation id: the start of every request header


def is_loopback(host: str) -> bool:
    """Whether every address `host` resolves to is a loopback one (an unresolvable host is not)."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return False
    return bool(infos) and all(
        ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback for info in infos
    )


class RequestServer:
    """Serves the requests of one voter's listener: `bind` listens, `open` takes the append credential and
    lets the connections accepted meanwhile be read, `close` and `wait_closed` stop it.

    `describe` gives what DescribeQuorum answers (the driver's view with the observers served).
    """

    def __init__(
        self,
        config: NodeConfig,
        driver: RaftDriver,
        observers: ObserverServer,
        connections: ConnectionTable,
        describe: Callable[[], QuorumDescription],
    ) -> None:
        self._config = config
        self._node_id = config.node_id
        self._driver = driver
        self._observers = observers
        self._connections = connections
        self._describe = describe
        self._append_secret = "\0"  # until `open`: no credential matches
        self._server: asyncio.Server | None = None
        self._ready: asyncio.Event | None = None
        self._voter_principals = config.voter_principals
        self._voter_directories = {
            v: d for v, d in config.voter_directory_ids.items() if v in config.voters and d
        }
        self._authorizer = config.authorizer
        self._server_tls = (
            config.listener_security.ssl_context()
        )  # a store that cannot be loaded fails here, at once
        self._limited = LimitedLog(log)

    async def bind(self, host: str, port: int) -> asyncio.Server:
        """Start listening on `host` `port` (0: any free port). Requests that arrive before `open` wait for it.

        Raises
        ------
        ServiceError
            A PLAINTEXT listener on a host that is not a loopback one, unless the config allows it.
        """
        listener = self._config.listener_security
        if not listener.secured and not self._config.allow_plaintext and not is_loopback(host):
            raise ServiceError(
                f"node {self._node_id} would listen on {host} in PLAINTEXT: anyone who reaches it could vote in "
                f"a voter's name; secure the listener (--listener-config) or allow it (--allow-plaintext)"
            )
        self._ready = asyncio.Event()
        self._server = await serve(
            host,
            port,
            self._handle_connection,
            self._server_tls,
            self._config.quorum_config.request_timeout_ms / 1000,
        )
        return self._server

    def open(self, append_secret: str) -> None:
        """Serve requests (the driver has started); appends must carry `append_secret`."""
        self._append_secret = append_secret
        if self._ready is not None:
            self._ready.set()

    def close(self) -> None:
        """Stop listening and close every connection (the driver has halted)."""
        if self._ready is not None:
            self._ready.set()
        if self._server is not None:
            self._server.close()
        self._connections.close_all()

    async def wait_closed(self) -> None:
        """Wait (at most a second) for the listener to have closed."""
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)

    # -- network: inbound ----------------------------------------------------------------------------------
    async def _handle_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = InboundConnection(writer)
        listener = self._config.listener_security
        if listener.uses_sasl:  # no principal until the SASL exchange completes
            peer = writer.get_extra_info("peername")
            conn.handshake = SaslHandshake(
                listener, self._api_versions, f"{peer[0]}:{peer[1]}" if peer else "?"
            )
        elif listener.uses_tls:
            conn.principal = principal_of_certificate(writer.get_extra_info("peercert"))
            conn.proven = conn.principal != ANONYMOUS
        else:
            conn.principal = ANONYMOUS
        if not self._connections.admit(conn):
            conn.close()
            return
        # backpressure: no next request is read while the replies not yet taken exceed the bound
        writer.transport.set_write_buffer_limits(high=self._config.max_unsent_bytes)
        body_timeout_s = self._config.quorum_config.request_timeout_ms / 1000
        try:
            if self._ready is not None and not self._ready.is_set():
                await (
                    self._ready.wait()
                )  # bound early (a local quorum learns its ports), serving once started
            while self._driver.running:
                if conn.pending is not None:
                    await conn.pending
                    conn.pending = None
                await writer.drain()
                await self._connections.within_share(conn)
                # before authentication a frame is a SASL token: Kafka's sasl.server.max.receive.size bounds it
                limit = self._config.max_frame_bytes if conn.principal is not None else SASL_MAX_RECEIVE_BYTES
                try:
                    payload = await read_frame(reader, limit, body_timeout_s)
                except FrameTooLargeError as exc:
                    head = b""
                    if exc.size >= 8:
                        with contextlib.suppress(Exception):
                            head = await asyncio.wait_for(reader.readexactly(8), 1.0)
                    api_key, _, corr = _HEAD.unpack(head) if len(head) == 8 else (-1, -1, -1)
                    self._refuse(
                        conn,
                        api_key,
                        corr,
                        Errors.MESSAGE_TOO_LARGE,
                        f"request frame of {exc.size} bytes exceeds the maximum of {limit}",
                    )
                    await writer.drain()
                    return
                conn.last_active = time.monotonic()
                if not self._on_request(payload, conn):
                    await writer.drain()
                    return
        except (asyncio.IncompleteReadError, ConnectionError, OSError, TimeoutError):
            pass
        finally:
            if conn.pending is not None:
                conn.pending.cancel()
            self._connections.discard(conn)
            conn.close()

    def _refuse(self, conn: InboundConnection, api_key: int, corr: int, code: int, text: str) -> bool:
        """Answer a request that cannot be read or served with a refusal frame; the connection is then closed."""
        log.warning(
            "node %d: refusing a request (API key %d, correlation id %d) and closing the connection: "
            "error %d: %s",
            self._node_id,
            api_key,
            corr,
            code,
            text,
        )
        conn.send(encode_refusal(corr, code, text, header_v1=api_key == APPEND_API_KEY))
        return False

    def _on_request(self, payload: bytes, conn: InboundConnection) -> bool:
        """Serve one request frame; False if the connection must be closed (after the refusal sent)."""
        try:
            api_key, version, corr, _client, body_start = rpc.peek_request(payload)
        except ProtocolError as exc:
            return self._refuse(conn, -1, -1, Errors.INVALID_REQUEST, f"not a Kafka request: {exc}")
        if self._driver.node is None or not self._driver.running:
            return False
        principal = conn.principal
        if principal is None:
            return self._authenticate(payload, conn)
        if api_key == ApiKey.API_VERSIONS:
            conn.send(self._api_versions(version, corr))
            return True
        if api_key == APPEND_API_KEY:
            if version != 0:
                return self._refuse(
                    conn,
                    api_key,
                    corr,
                    Errors.UNSUPPORTED_VERSION,
                    f"append v{version} is not supported (v0 is)",
                )
            if not self._authorizer.allows(principal, api_key):
                self._log_denied(principal, api_key)
                conn.send(
                    encode_append_response(
                        AppendResponse(Errors.CLUSTER_AUTHORIZATION_FAILED, REFUSAL, self._node_id), corr
                    )
                )
                return True
            try:
                request = decode_append_request(payload, body_start)
            except CodecError as exc:
                return self._refuse(conn, api_key, corr, Errors.INVALID_REQUEST, f"malformed append: {exc}")
            self._serve_append(request, corr, conn)
            return True
        versions = SERVED.get(api_key)
        if versions is None:
            return self._refuse(
                conn,
                api_key,
                corr,
                Errors.UNSUPPORTED_VERSION,
                f"API key {api_key} is not served by a kraftlake voter (see ApiVersions)",
            )
        name = rpc.api(api_key).name
        if version not in versions:
            return self._refuse(
                conn,
                api_key,
                corr,
                Errors.UNSUPPORTED_VERSION,
                f"{name} v{version} is not supported (kraftlake serves v{versions})",
            )
        try:
            _, body = rpc.decode_request(payload)
        except ProtocolError as exc:
            return self._refuse(
                conn,
                api_key,
                corr,
                Errors.INVALID_REQUEST,
                f"malformed {name} v{version} request: {exc}",
            )
        try:
            if not self._authorizer.allows(principal, api_key):
                self._log_denied(principal, api_key)
                raise RequestRefused(Errors.CLUSTER_AUTHORIZATION_FAILED, REFUSAL)
            self._dispatch(api_key, version, corr, body, conn)
        except RequestRefused as exc:
            conn.send(
                encode_response(error_response(api_key, version, exc.code, str(exc)), api_key, version, corr)
            )
        return True

    def _authenticate(self, payload: bytes, conn: InboundConnection) -> bool:
        """A request before the SASL exchange completed: only the exchange itself is served."""
        handshake = conn.handshake
        assert handshake is not None
        frame, keep_open = handshake.handle(payload)
        if frame is not None:
            conn.send(frame)
        conn.principal = handshake.principal
        if conn.principal is not None:
            conn.proven = True
        return keep_open

    def _log_denied(self, principal: str, api_key: int) -> None:
        name = "append" if api_key == APPEND_API_KEY else rpc.api(api_key).name
        log.warning("node %d: %s refused to %s: no ACL allows it", self._node_id, name, principal)

    def _dispatch(self, api_key: int, version: int, corr: int, body: Any, conn: InboundConnection) -> None:
        if api_key == ApiKey.DESCRIBE_QUORUM:
            conn.send(encode_response(self._describe_quorum(version, body), api_key, version, corr))
            return
        if api_key == ApiKey.DESCRIBE_CLUSTER:
            conn.send(encode_response(self._describe_cluster(version, body), api_key, version, corr))
            return
        if api_key == ApiKey.FETCH:
            replica = fetch_replica_id(body, version)
            if replica == self._node_id:
                raise RequestRefused(Errors.INVALID_REQUEST, f"Fetch from replica {replica}: this node's id")
            if replica not in self._driver.voters:
                check_cluster_id(body.cluster_id, self._config.cluster_id)
                self._observers.serve_fetch(version, corr, body, conn)
                return
        elif api_key == ApiKey.FETCH_SNAPSHOT and body.replica_id not in self._driver.voters:
            check_cluster_id(body.cluster_id, self._config.cluster_id)
            self._observers.serve_snapshot(version, corr, body, conn)
            return
        message = raft_request(api_key, version, corr, body, self._node_id, self._config.cluster_id)
        if message.src not in self._driver.voters or message.src == self._node_id:
            raise RequestRefused(
                Errors.INCONSISTENT_VOTER_SET,
                f"{rpc.api(api_key).name} from node {message.src}, not a voter of this quorum",
            )
        self._check_voter_identity(api_key, version, body, conn, message.src)
        conn.proven = True
        self._driver.step_request(message, conn, api_key, version)

    def _check_voter_identity(
        self, api_key: int, version: int, body: Any, conn: InboundConnection, voter: int
    ) -> None:
        """A voter-only request is taken only from the voter it names: its principal on a secured listener
        (`VoterPrincipals`), and its directory id wherever the request carries one (the one configured, else
        the first seen in its name). BeginQuorumEpoch and EndQuorumEpoch carry none: in PLAINTEXT nothing
        tells their sender from anyone else's.

        Raises
        ------
        RequestRefused
            31 for a principal not bound to `voter`; INCONSISTENT_VOTER_SET for another directory id;
            INVALID_REQUEST for a Vote, Fetch or FetchSnapshot without one (a version before Kafka's KIP-853).
        """
        name = rpc.api(api_key).name
        principal = conn.principal or ANONYMOUS
        if self._config.listener_security.secured and not self._voter_principals.may_speak_for(
            principal, voter
        ):
            self._limited.log(
                ("voter-principal", principal, voter),
                logging.WARNING,
                "node %d: %s in voter %d's name refused to %s: not a principal of that voter",
                self._node_id,
                name,
                voter,
                principal,
            )
            raise RequestRefused(Errors.CLUSTER_AUTHORIZATION_FAILED, REFUSAL)
        directory = sender_directory_id(api_key, version, body)
        if directory is None and api_key in (ApiKey.BEGIN_QUORUM_EPOCH, ApiKey.END_QUORUM_EPOCH):
            return
        if not directory:
            raise RequestRefused(
                Errors.INVALID_REQUEST,
                f"{name} v{version} in voter {voter}'s name without its directory id",
            )
        known = self._voter_directories.get(voter)
        if known is None:
            self._voter_directories[voter] = directory
            log.info("node %d: voter %d has directory id %s (first seen)", self._node_id, voter, directory)
        elif directory != known:
            self._limited.log(
                ("voter-directory", voter, directory),
                logging.WARNING,
                "node %d: %s in voter %d's name refused: directory id %s, not the voter's %s",
                self._node_id,
                name,
                voter,
                directory,
                known,
            )
            raise RequestRefused(
                Errors.INCONSISTENT_VOTER_SET,
                f"{name} in voter {voter}'s name from another directory than the voter's",
            )

    def _api_versions(self, version: int, corr: int) -> bytes:
        served = {**SERVED, **SASL_SERVED} if self._config.listener_security.uses_sasl else SERVED
        keys = [
            rpc_messages.ApiVersionsResponse.ApiVersion(
                api_key=k, min_version=v.lowest, max_version=v.highest
            )
            for k, v in sorted(served.items())
        ]
        if version not in SERVED[ApiKey.API_VERSIONS]:
            # Kafka's answer to a version it lacks: UNSUPPORTED_VERSION in a v0 body listing its ranges
            body = rpc_messages.ApiVersionsResponse(error_code=Errors.UNSUPPORTED_VERSION, api_keys=keys)
            return encode_response(body, ApiKey.API_VERSIONS, 0, corr)
        body = rpc_messages.ApiVersionsResponse(error_code=0, api_keys=keys, throttle_time_ms=0)
        return encode_response(body, ApiKey.API_VERSIONS, version, corr)

    def _describe_cluster(self, version: int, body: Any) -> Any:
        node = self._driver.node
        assert node is not None
        cls = rpc_messages.DescribeClusterResponse
        if version >= 1 and body.endpoint_type != CONTROLLER_ENDPOINT_TYPE:
            return cls(
                error_code=Errors.MISMATCHED_ENDPOINT_TYPE,
                error_message="kraftlake voters are controllers: ask with EndpointType 2 "
                "(--bootstrap-controller)",
                endpoint_type=body.endpoint_type,
                cluster_id="",
            )
        brokers = [
            cls.DescribeClusterBroker(broker_id=v, host=host, port=port, rack=None)
            for v, (host, port) in sorted(self._driver.voters.items())
        ]
        extra = {"endpoint_type": CONTROLLER_ENDPOINT_TYPE} if version >= 1 else {}
        return cls(
            throttle_time_ms=0,
            error_code=0,
            error_message=None,
            cluster_id=self._config.cluster_id,
            controller_id=-1 if node.leader_id is None else node.leader_id,
            brokers=brokers,
            **extra,
        )

    def _describe_quorum(self, version: int, body: Any) -> Any:
        node = self._driver.node
        assert node is not None
        cls = rpc_messages.DescribeQuorumResponse
        check = [(t.topic_name, [p.partition_index for p in t.partitions]) for t in body.topics]
        if check != [(METADATA_TOPIC, [0])]:
            return cls(
                error_code=Errors.INVALID_REQUEST,
                error_message=f"DescribeQuorum of {check}: only {METADATA_TOPIC} partition 0 has a quorum"
                if version >= 2
                else None,
            )
        return describe_quorum_response(self._describe(), version, node.is_leader, self._node_id)

    # -- the append RPC ------------------------------------------------------------------------------------
    def _serve_append(self, request: AppendRequest, corr: int, conn: InboundConnection) -> None:
        def reply(outcome: tuple[int, int] | BaseException) -> None:
            node = self._driver.node
            assert node is not None
            me = self._node_id
            if isinstance(outcome, NotLeaderError):
                response = AppendResponse(
                    Errors.NOT_LEADER_OR_FOLLOWER,
                    str(outcome),
                    me,
                    outcome.leader_id,
                    outcome.leader_endpoint or "",
                    outcome.epoch,
                )
            elif isinstance(outcome, BaseException):
                response = AppendResponse(
                    Errors.UNKNOWN_SERVER_ERROR, str(outcome), me, node.leader_id, "", node.epoch
                )
            else:
                response = AppendResponse(Errors.NONE, None, me, me, "", node.epoch, outcome[0], outcome[1])
            conn.send(encode_append_response(response, corr))

        if not hmac.compare_digest(request.credential.encode(), self._append_secret.encode()):
            # says nothing a stranger could use: not the secret, not the cluster id
            conn.send(
                encode_append_response(
                    AppendResponse(
                        Errors.CLUSTER_AUTHORIZATION_FAILED,
                        "append refused: no valid append credential",
                        self._node_id,
                    ),
                    corr,
                )
            )
            return
        conn.proven = True
        try:
            check_cluster_id(request.cluster_id, self._config.cluster_id)
        except RequestRefused as exc:
            conn.send(encode_append_response(AppendResponse(exc.code, str(exc), self._node_id), corr))
            return
        if not request.values:
            reply(ServiceError("append of no values"))
            return
        self._driver.append(list(request.values), reply)
