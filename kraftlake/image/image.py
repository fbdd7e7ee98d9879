"""The immutable ``MetadataImage``: the cluster metadata state at one offset of the log."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, TypeVar, overload

from kraftlake.image.model import (
    Acl,
    BrokerRegistration,
    ControllerRegistration,
    DelegationToken,
    OpenTransaction,
    Provenance,
    ScramCredential,
    TopicImage,
)
from kraftlake.image.pmap import PMap
from kraftlake.protocol import messages as m

ConfigKey = tuple[int, str]
"""A config resource: (Kafka's ``ConfigResource.Type`` id, resource name); e.g. (2, "orders") is a topic."""

QuotaEntity = tuple[tuple[str, "str | None"], ...]
"""A client quota entity: its (entity type, entity name) pairs sorted by type; a None name is the default."""

ScramKey = tuple[int, str]
"""A SCRAM credential: (mechanism id, user name)."""
_T = TypeVar("_T")


class TopicsByName(Mapping[str, TopicImage]):
    """Topics by name: a persistent name -> topic id map read through ``topics_by_id``.

    Kafka keeps two maps of ``TopicImage``; here only the id map holds topics, so that a partition change
    (the commonest record by far) updates one persistent map, not two. ``ids`` is the name -> id map.
    """

    __slots__ = ("_by_id", "ids")

    def __init__(self, ids: PMap[str, str], by_id: PMap[str, TopicImage]) -> None:
        self.ids = ids
        self._by_id = by_id

    def __getitem__(self, name: str) -> TopicImage:
        return self._by_id[self.ids[name]]

    @overload
    def get(self, name: str, /) -> TopicImage | None: ...
    @overload
    def get(self, name: str, /, default: TopicImage) -> TopicImage: ...
    @overload
    def get(self, name: str, /, default: _T) -> TopicImage | _T: ...
    def get(self, name: str, default: object = None) -> object:
        topic_id = self.ids.get(name)
        if topic_id is None:
            return default
        return self._by_id.get(topic_id, default)

    def __contains__(self, name: object) -> bool:
        return name in self.ids

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return f"TopicsByName({len(self.ids)} topics)"


# a transaction in flight: (name, begin offset, pending records as a cons list (record, rest) | None)
_Chain = tuple[m.Record, "_Chain"] | None
_Txn = tuple["str | None", int, _Chain]


class MetadataImage:
    """The metadata state at one offset (Kafka's ``MetadataImage``), immutable.

    Maps are shared between images and must never be mutated: ``topics_by_id``, ``topic_ids`` (name -> id;
    ``topics_by_name`` is a view over both), ``configs`` and ``acls`` are persistent maps (``PMap``); the small ones (features, brokers, controllers,
    quotas, SCRAM, tokens) are plain dicts copied when a delta changes them.

    When the image's offset lies inside an open metadata transaction, the state is the one before
    BeginTransaction (Kafka publishes images only at transaction boundaries), ``provenance`` is the record
    read last and ``transaction`` describes the open transaction and holds its pending records.
    """

    __slots__ = (
        "_txn",
        "acls",
        "brokers",
        "client_quotas",
        "configs",
        "controllers",
        "delegation_tokens",
        "features",
        "next_producer_id",
        "provenance",
        "scram",
        "topic_ids",
        "topics_by_id",
    )

    def __init__(
        self,
        provenance: Provenance,
        features: dict[str, int],
        brokers: dict[int, BrokerRegistration],
        controllers: dict[int, ControllerRegistration],
        topics_by_id: PMap[str, TopicImage],
        topic_ids: PMap[str, str],
        configs: PMap[ConfigKey, dict[str, str]],
        client_quotas: dict[QuotaEntity, dict[str, float]],
        next_producer_id: int,
        acls: PMap[str, Acl],
        scram: dict[ScramKey, ScramCredential],
        delegation_tokens: dict[str, DelegationToken],
        txn: _Txn | None = None,
    ) -> None:
        self.provenance = provenance
        self.features: Mapping[str, int] = features
        self.brokers: Mapping[int, BrokerRegistration] = brokers
        self.controllers: Mapping[int, ControllerRegistration] = controllers
        self.topics_by_id = topics_by_id
        self.topic_ids = topic_ids
        self.configs = configs
        self.client_quotas: Mapping[QuotaEntity, dict[str, float]] = client_quotas
        self.next_producer_id = next_producer_id
        self.acls = acls
        self.scram: Mapping[ScramKey, ScramCredential] = scram
        self.delegation_tokens: Mapping[str, DelegationToken] = delegation_tokens
        self._txn = txn

    # -- derived views ------------------------------------------------------------------------------------

    @property
    def topics_by_name(self) -> TopicsByName:
        """Topics by name (a view over ``topic_ids`` and ``topics_by_id``)."""
        return TopicsByName(self.topic_ids, self.topics_by_id)

    @property
    def offset(self) -> int:
        return self.provenance.offset

    @property
    def metadata_version(self) -> int | None:
        """The feature level of ``metadata.version``, None before the first FeatureLevelRecord for it."""
        return self.features.get("metadata.version")

    @property
    def in_transaction(self) -> bool:
        """Whether a metadata transaction is open at this offset (cheap: ``transaction`` builds its records)."""
        return self._txn is not None

    @property
    def transaction(self) -> OpenTransaction | None:
        """The open metadata transaction at this offset, if any, with its pending records in log order."""
        if self._txn is None:
            return None
        name, begin, chain = self._txn
        pending: list[m.Record] = []
        while chain is not None:
            pending.append(chain[0])
            chain = chain[1]
        pending.reverse()
        return OpenTransaction(name, begin, tuple(pending))

    def topic(self, name_or_id: str) -> TopicImage | None:
        """A topic by name, or by id if no topic has that name."""
        t = self.topics_by_name.get(name_or_id)
        return t if t is not None else self.topics_by_id.get(name_or_id)

    def partition_count(self) -> int:
        return sum(len(t.partitions) for t in self.topics_by_id.values())

    def is_empty(self) -> bool:
        """True if the image holds no metadata at all (provenance aside)."""
        return not (
            self.features
            or self.brokers
            or self.controllers
            or len(self.topics_by_id)
            or len(self.configs)
            or self.client_quotas
            or self.next_producer_id != -1
            or len(self.acls)
            or self.scram
            or self.delegation_tokens
        )

    # -- evolution ----------------------------------------------------------------------------------------

    # the fields' values are of each field's own type: Any, as for keyword arguments of mixed types
    def _replace(self, **changes: Any) -> MetadataImage:
        fields: dict[str, Any] = {
            "provenance": self.provenance,
            "features": self.features,
            "brokers": self.brokers,
            "controllers": self.controllers,
            "topics_by_id": self.topics_by_id,
            "topic_ids": self.topic_ids,
            "configs": self.configs,
            "client_quotas": self.client_quotas,
            "next_producer_id": self.next_producer_id,
            "acls": self.acls,
            "scram": self.scram,
            "delegation_tokens": self.delegation_tokens,
            "txn": self._txn,
        }
        fields.update(changes)
        return MetadataImage(**fields)

    def with_provenance(self, provenance: Provenance) -> MetadataImage:
        """The same state with another provenance."""
        return self._replace(provenance=provenance)

    def _with_topics(self, provenance: Provenance, topics_by_id: PMap[str, TopicImage]) -> MetadataImage:
        """The same state but ``topics_by_id`` (names unchanged): replay's fast path for partition records."""
        new = object.__new__(MetadataImage)
        new.provenance = provenance
        new.features = self.features
        new.brokers = self.brokers
        new.controllers = self.controllers
        new.topics_by_id = topics_by_id
        new.topic_ids = self.topic_ids
        new.configs = self.configs
        new.client_quotas = self.client_quotas
        new.next_producer_id = self.next_producer_id
        new.acls = self.acls
        new.scram = self.scram
        new.delegation_tokens = self.delegation_tokens
        new._txn = self._txn
        return new

    # -- comparison ---------------------------------------------------------------------------------------

    def state_equals(self, other: MetadataImage) -> bool:
        """True if both images hold the same metadata (provenance and open transaction ignored)."""
        return (
            self.features == other.features
            and self.brokers == other.brokers
            and self.controllers == other.controllers
            and self.topics_by_id == other.topics_by_id
            and self.configs == other.configs
            and self.client_quotas == other.client_quotas
            and self.next_producer_id == other.next_producer_id
            and self.acls == other.acls
            and self.scram == other.scram
            and self.delegation_tokens == other.delegation_tokens
        )

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, MetadataImage):
            return NotImplemented
        return (
            self.provenance == other.provenance
            and self.transaction == other.transaction
            and self.state_equals(other)
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"MetadataImage(offset={self.provenance.offset}, epoch={self.provenance.epoch}, "
            f"features={dict(self.features)}, brokers={len(self.brokers)}, topics={len(self.topics_by_id)}, "
            f"partitions={self.partition_count()}, open_transaction={self._txn is not None})"
        )


EMPTY = MetadataImage(
    provenance=Provenance(),
    features={},
    brokers={},
    controllers={},
    topics_by_id=PMap(),
    topic_ids=PMap(),
    configs=PMap(),
    client_quotas={},
    next_producer_id=-1,
    acls=PMap(),
    scram={},
    delegation_tokens={},
)
"""The image of an empty log (Kafka's ``MetadataImage.EMPTY``)."""
