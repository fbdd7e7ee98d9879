"""Who may send what to a voter: Kafka's StandardAuthorizer rules for a controller listener, on the cluster.

Each request a voter serves needs one operation on the cluster resource, as Kafka's ControllerApis asks for it:
Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and FetchSnapshot need CLUSTER_ACTION (what controllers grant
each other: observers that fetch need it too, as from a Kafka controller); DescribeQuorum needs DESCRIBE;
DescribeCluster needs ALTER (Kafka's ControllerApis: "unlike on the broker, DESCRIBE_CLUSTER on the controller
requires ... ALTER on CLUSTER", so ``kafka-metadata-quorum`` needs ALTER); kraftlake's append (API key 1000, no
Kafka equivalent) needs ALTER too. ApiVersions and the SASL
handshake need nothing. Implications are Kafka's: ALL grants every operation, ALTER grants DESCRIBE.

Configuration (the listener's properties file, beside its security):

- ``authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer`` turns authorization on
  (without it every connection that authenticated may send everything, as a Kafka listener without an
  authorizer);
- ``super.users=User:voter-1;User:CN=voter-2`` (Kafka's ``;``-separated list) may do everything;
- ``kraftlake.acl.cluster.<Operation>=User:a;User:b``: the principals allowed an operation on the cluster
  (``ClusterAction``, ``Describe``, ``Alter``, ``All``, spelled as ``kafka-acls --operation`` spells them;
  ``User:*`` is everyone). Kafka keeps ACLs in its metadata log; a voter reads these at start;
- ``allow.everyone.if.no.acl.found`` (Kafka's, default false): with true, an operation no ACL names is allowed.

A refused request gets CLUSTER_AUTHORIZATION_FAILED (31) with Kafka's message, which says nothing about the
cluster.

Voter identity (`VoterPrincipals`): on a secured listener, the requests only a voter sends (Vote,
BeginQuorumEpoch, EndQuorumEpoch, a Fetch or FetchSnapshot naming a voter's id) are taken only from a principal
bound to the voter id they name: ``kraftlake.voter.principal.<id>=User:<name>`` (a ``;``-separated list; several
ids may share one principal, which can then speak for each of them). Without any such binding, the principals of
``super.users`` speak for every voter (what Kafka's controllers are: super users of each other), and with no
authorizer at all any authenticated principal does (Kafka's rule for a listener without an authorizer). An
observer's principal (ClusterAction only) is then refused 31 for a Fetch in a voter's name: its Fetches never
count towards the high watermark.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from kraftlake.protocol.rpc import ApiKey
from kraftlake.service.errors import ServiceError
from kraftlake.service.rpc_common import APPEND_API_KEY

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ACL_PREFIX = "kraftlake.acl.cluster."
WILDCARD = "User:*"
REFUSAL = "Cluster authorization failed."
"""Kafka's ClusterAuthorizationException message: nothing about the cluster, the principal or the ACLs."""


class Operation(enum.Enum):
    """Kafka's AclOperation values that a voter's requests need on the cluster resource."""

    ALL = "All"
    ALTER = "Alter"
    DESCRIBE = "Describe"
    CLUSTER_ACTION = "ClusterAction"


REQUIRED: dict[int, Operation] = {
    ApiKey.VOTE: Operation.CLUSTER_ACTION,
    ApiKey.BEGIN_QUORUM_EPOCH: Operation.CLUSTER_ACTION,
    ApiKey.END_QUORUM_EPOCH: Operation.CLUSTER_ACTION,
    ApiKey.FETCH: Operation.CLUSTER_ACTION,
    ApiKey.FETCH_SNAPSHOT: Operation.CLUSTER_ACTION,
    ApiKey.DESCRIBE_QUORUM: Operation.DESCRIBE,
    ApiKey.DESCRIBE_CLUSTER: Operation.ALTER,
    APPEND_API_KEY: Operation.ALTER,
}
"""The operation on the cluster each served request needs (ApiVersions and SASL need none)."""

_IMPLIED_BY: dict[Operation, tuple[Operation, ...]] = {
    Operation.DESCRIBE: (Operation.DESCRIBE, Operation.ALTER, Operation.ALL),
    Operation.ALTER: (Operation.ALTER, Operation.ALL),
    Operation.CLUSTER_ACTION: (Operation.CLUSTER_ACTION, Operation.ALL),
    Operation.ALL: (Operation.ALL,),
}


@dataclass(frozen=True)
class ClusterAuthorizer:
    """Decides whether a principal may perform an operation on the cluster (`enabled` False: anyone may)."""

    enabled: bool = False
    super_users: frozenset[str] = frozenset()
    acls: Mapping[Operation, frozenset[str]] = field(default_factory=dict)
    allow_if_no_acl: bool = False

    def allows(self, principal: str, api_key: int) -> bool:
        """Whether `principal` (``User:<name>``) may send a request of `api_key`."""
        operation = REQUIRED.get(api_key)
        if not self.enabled or operation is None or principal in self.super_users:
            return True
        granting = [self.acls[op] for op in _IMPLIED_BY[operation] if op in self.acls]
        if not granting:
            return self.allow_if_no_acl
        return any(principal in allowed or WILDCARD in allowed for allowed in granting)


OPEN = ClusterAuthorizer()
"""No authorization: every connection may send everything (PLAINTEXT's default, as before)."""


def parse_principals(text: str, where: str) -> frozenset[str]:
    """Kafka's ``;``-separated principal list (a principal may hold commas: ``User:CN=a,O=b``).

    Raises
    ------
    ServiceError
        On an entry without Kafka's ``User:`` type.
    """
    out = set()
    for item in text.split(";"):
        item = item.strip()
        if not item:
            continue
        kind, sep, name = item.partition(":")
        if not sep or kind != "User" or not name:
            raise ServiceError(f"{where}: {item!r} is not a principal (expected User:<name>)")
        out.add(item)
    return frozenset(out)


def authorizer_from_properties(properties: Mapping[str, str], source: str) -> ClusterAuthorizer:
    """The authorizer the listener properties describe (`OPEN` without ``authorizer.class.name``).

    Raises
    ------
    ServiceError
        An authorizer class other than StandardAuthorizer, an unknown operation, a malformed principal, or ACLs
        without an authorizer (they would not be enforced).
    """
    name = properties.get("authorizer.class.name", "").strip()
    acl_keys = [k for k in properties if k.startswith(ACL_PREFIX)]
    if not name:
        if acl_keys or properties.get("super.users", "").strip():
            raise ServiceError(
                f"{source}: super.users and {ACL_PREFIX}* need authorizer.class.name="
                f"{STANDARD_AUTHORIZER} (without it nothing is enforced)"
            )
        return OPEN
    if name != STANDARD_AUTHORIZER:
        raise ServiceError(
            f"{source}: authorizer.class.name: {name} is not supported (only {STANDARD_AUTHORIZER})"
        )
    operations = {op.value.lower(): op for op in Operation}
    acls: dict[Operation, frozenset[str]] = {}
    for key in acl_keys:
        spelled = key[len(ACL_PREFIX) :]
        op = operations.get(spelled.replace("_", "").lower())
        if op is None:
            raise ServiceError(
                f"{source}: {key}: unknown operation {spelled!r} (expected one of "
                f"{', '.join(o.value for o in Operation)})"
            )
        acls[op] = parse_principals(properties[key], f"{source}: {key}")
    allow = properties.get("allow.everyone.if.no.acl.found", "false").strip().lower()
    if allow not in ("true", "false"):
        raise ServiceError(f"{source}: allow.everyone.if.no.acl.found: {allow!r} is not true or false")
    return ClusterAuthorizer(
        True,
        parse_principals(properties.get("super.users", ""), f"{source}: super.users"),
        acls,
        allow == "true",
    )


VOTER_PRINCIPAL_PREFIX = "kraftlake.voter.principal."


@dataclass(frozen=True)
class VoterPrincipals:
    """Which principals may send the requests of which voter (see the module docstring).

    `bound` maps voter ids to their principals; when it is empty, `fallback` speaks for every voter (None:
    anyone).
    """

    bound: Mapping[int, frozenset[str]] = field(default_factory=dict)
    fallback: frozenset[str] | None = None

    def may_speak_for(self, principal: str, voter_id: int) -> bool:
        """Whether `principal` may send a voter-only request in voter `voter_id`'s name."""
        if self.bound:
            return principal in self.bound.get(voter_id, frozenset())
        return self.fallback is None or principal in self.fallback


def voter_principals_from_properties(
    properties: Mapping[str, str], source: str, voters: frozenset[int] | set[int]
) -> VoterPrincipals:
    """The voter bindings of the listener properties.

    Raises
    ------
    ServiceError
        A key whose id is not a voter, or a malformed principal.
    """
    bound: dict[int, frozenset[str]] = {}
    for key, value in properties.items():
        if not key.startswith(VOTER_PRINCIPAL_PREFIX):
            continue
        spelled = key[len(VOTER_PRINCIPAL_PREFIX) :]
        try:
            voter = int(spelled)
        except ValueError:
            raise ServiceError(f"{source}: {key}: {spelled!r} is not a voter id") from None
        if voter not in voters:
            raise ServiceError(f"{source}: {key}: {voter} is not a voter ({sorted(voters)})")
        bound[voter] = parse_principals(value, f"{source}: {key}")
    if bound:
        return VoterPrincipals(bound)
    authorizer = authorizer_from_properties(properties, source)
    return VoterPrincipals(fallback=authorizer.super_users if authorizer.enabled else None)
