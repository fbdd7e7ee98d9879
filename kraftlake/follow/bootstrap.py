"""``--bootstrap-controller``: controller listeners as ``HOST:PORT`` or as Kafka's voter string ``ID@HOST:PORT``.

Before Kafka 3.9 every node knows the quorum from ``controller.quorum.voters=1@host:9093,2@host:9093,...``, and
those releases' raft leaders name no endpoints in their Fetch answers (``NodeEndpoints`` came with Fetch v16
and is filled by the raft layer only from 3.9, KIP-853): an observer learns only the leader's *id*. Given the
voter string, the follower knows at once where each id listens; given plain ``HOST:PORT``s, it learns it from
the controllers themselves (`kraftlake.follow.observer.MetadataObserver` asks each at the leader's epoch: only
the leader answers a Fetch there). Both forms may be mixed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kraftlake.follow.observer import Endpoint, parse_endpoints


@dataclass(frozen=True)
class Bootstrap:
    """Where to start: the endpoints to ask, and the voter ids already known to listen at some of them."""

    endpoints: list[Endpoint]
    voters: dict[int, Endpoint] = field(default_factory=dict)


def parse_bootstrap(text: str) -> Bootstrap:
    """``HOST:PORT`` and ``ID@HOST:PORT`` items, comma-separated (IPv6 hosts in brackets).

    Raises
    ------
    ValueError
        Naming the item that is neither.
    """
    endpoints: list[Endpoint] = []
    voters: dict[int, Endpoint] = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        node, at, address = item.partition("@")
        if at:
            if not node.strip().isdigit():
                raise ValueError(f"{item!r}: a voter is ID@HOST:PORT with a non-negative integer ID")
            (endpoint,) = parse_endpoints(address)
            voter_id = int(node)
            if voter_id in voters and voters[voter_id] != endpoint:
                raise ValueError(f"voter {voter_id} given twice: {voters[voter_id]} and {endpoint}")
            voters[voter_id] = endpoint
        else:
            (endpoint,) = parse_endpoints(item)
        if endpoint not in endpoints:
            endpoints.append(endpoint)
    if not endpoints:
        raise ValueError(f"no HOST:PORT or ID@HOST:PORT in {text!r}")
    return Bootstrap(endpoints, voters)
