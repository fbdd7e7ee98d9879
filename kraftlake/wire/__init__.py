"""Kafka's client side of the wire: client security properties (TLS, SASL) as Kafka's Java clients read them.

Modules: :mod:`kraftlake.wire.client_config` (``client.properties`` → :class:`ClientSecurity`, the TLS
context), :mod:`kraftlake.wire.sasl` (SASL PLAIN and SCRAM client mechanisms), :mod:`kraftlake.wire.errors`.
"""
