"""`ConnectionTable`: a voter's inbound connections, their admission, idle sweep and unsent-reply budget.

Connections are proven (authenticated by SASL or a client certificate, or having sent a voter's request that
passed the identity checks or an append with the credential) or not; unproven ones give way to new ones past
the limits. The replies written but not yet taken by their clients count against one budget for the voter.
"""

from __future__ import annotations

import asyncio
import logging
import time

from kraftlake.service.config import NodeConfig
from kraftlake.service.limited_log import LimitedLog
from kraftlake.service.transport import InboundConnection

log = logging.getLogger(__name__)

BUDGET_POLL_S = 0.01
"""How often a reply held back by the unsent-reply budget looks again (and how stale the recount may be)."""


class ConnectionTable:
    """The open inbound connections of one voter (on its loop), from the first `add` until `close_all`."""

    def __init__(self, config: NodeConfig) -> None:
        self._config = config
        self._node_id = config.node_id
        self._connections: set[InboundConnection] = set()
        self._sweep: asyncio.TimerHandle | None = None
        self._unsent: tuple[float, int] = (0.0, 0)
        self._open = True
        self._limited = LimitedLog(log)

    def __len__(self) -> int:
        return len(self._connections)

    def admit(self, conn: InboundConnection) -> bool:
        """Add a new connection if it may stay: past `max_connections`, or past the unproven connections' share
        (all but `reserved_connections`), the oldest unproven connection is closed for it; with none to close,
        it is refused (False, not added). Each cause is logged once a minute."""
        config = self._config
        unproven = [c for c in self._connections if not c.proven]
        if len(self._connections) >= config.max_connections or (
            not conn.proven and len(unproven) >= config.max_connections - config.reserved_connections
        ):
            if not unproven:
                self._limited.log(
                    "connections-full",
                    logging.WARNING,
                    "node %d: %d proven connections open (max_connections), closing a new one",
                    self._node_id,
                    len(self._connections),
                )
                return False
            oldest = min(unproven, key=lambda c: c.last_active)
            self._limited.log(
                "connections-evicted",
                logging.WARNING,
                "node %d: %d connections open (%d unproven), closing the oldest unproven one for a new one",
                self._node_id,
                len(self._connections),
                len(unproven),
            )
            self._connections.discard(oldest)
            oldest.close()
        self._connections.add(conn)
        self._arm_sweep()
        return True

    def discard(self, conn: InboundConnection) -> None:
        """Forget a connection that has ended."""
        self._connections.discard(conn)

    def close_all(self) -> None:
        """Close every connection and stop sweeping (the voter stops)."""
        self._open = False
        if self._sweep is not None:
            self._sweep.cancel()
        for conn in list(self._connections):
            conn.close()

    def unsent_total(self) -> int:
        """The replies written but not yet taken by their clients, over all connections (recounted at most
        every `BUDGET_POLL_S`)."""
        now = time.monotonic()
        at, total = self._unsent
        if now - at >= BUDGET_POLL_S:
            total = 0
            for c in self._connections:
                transport = c.writer.transport
                if transport is not None:
                    total += transport.get_write_buffer_size()
            self._unsent = (now, total)
        return total

    async def within_share(self, conn: InboundConnection) -> None:
        """Wait while the voter's unsent replies exceed its budget and this connection holds more than its
        share of them (the budget over the connections open): its next request is not read meanwhile. Proven
        connections (the other voters among them) are read on: what they are sent is bounded by the raft
        protocol (one Fetch in flight per follower) and by the budget observer answers wait for."""
        budget = self._config.max_unsent_total_bytes
        transport = conn.writer.transport
        while (
            self._open
            and not conn.proven
            and not conn.closed
            and transport is not None
            and transport.get_write_buffer_size() > budget // max(1, len(self._connections))
            and self.unsent_total() >= budget
        ):
            await asyncio.sleep(BUDGET_POLL_S)

    def _arm_sweep(self) -> None:
        if self._sweep is None and self._open:
            config = self._config
            interval = min(
                1.0, config.sasl_handshake_timeout_ms / 4000, config.connections_max_idle_ms / 4000
            )
            self._sweep = asyncio.get_running_loop().call_later(interval, self._sweep_connections, interval)

    def _sweep_connections(self, interval: float) -> None:
        """Close connections idle past `connections_max_idle_ms` and SASL connections not authenticated within
        `sasl_handshake_timeout_ms` (one log line per cause a minute)."""
        self._sweep = None
        now = time.monotonic()
        idle_s = self._config.connections_max_idle_ms / 1000
        sasl_s = self._config.sasl_handshake_timeout_ms / 1000
        for conn in list(self._connections):
            if conn.principal is None and now - conn.opened > sasl_s:
                cause, what = "sasl-timeout", f"not authenticated within {sasl_s:g} s"
            elif now - conn.last_active > idle_s and conn.pending is None:
                cause, what = "idle", f"idle for {idle_s:g} s (connections.max.idle.ms)"
            else:
                continue
            self._limited.log(cause, logging.INFO, "node %d: closing a connection %s", self._node_id, what)
            self._connections.discard(conn)
            conn.close()
        if self._connections and self._open:
            self._sweep = asyncio.get_running_loop().call_later(interval, self._sweep_connections, interval)
