"""A seeded synthetic metadata log with every entity kind, written as real segment files.

Brokers register, fence, unfence, change and unregister; a controller registers; topics are created with
partitions, change leaders, ISRs, replicas and ELRs and are deleted (with their configs); configs, client
quotas, producer ids, ACLs, SCRAM credentials and delegation tokens come and go; some changes run inside
metadata transactions, some of which abort. The log is cut into batches of 1..6 records over several epochs and
written as two segments, so readers cross a segment boundary. Every record replays cleanly into
``kraftlake.image`` (a small model of the state keeps the workload to valid changes).
"""

from __future__ import annotations

import base64
import random
from pathlib import Path
from typing import Any

from kraftlake.logformat.batch import build_data_batch
from kraftlake.logformat.segment import segment_filename
from kraftlake.protocol import messages as m
from kraftlake.records import encode_metadata_record, spec_by_name


def _uuid(rng: random.Random) -> str:
    return base64.urlsafe_b64encode(rng.randbytes(16)).decode("ascii").rstrip("=")


def encode_latest(rec: Any) -> bytes:
    """A record's value at its highest version (the frame and the body)."""
    return encode_metadata_record(rec, spec_by_name(type(rec).__name__).valid_versions.highest)


# the kinds of change ``_Model.step`` picks from, "change" three times as often as the others
KINDS = [
    "topic",
    "change",
    "change",
    "change",
    "delete",
    "config",
    "broker",
    "quota",
    "pid",
    "acl",
    "scram",
    "token",
    "feature",
    "clear_elr",
]


class _Model:
    """Just enough state to emit only records that replay cleanly."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.brokers: dict[int, int] = {}  # id -> epoch
        self.topics: dict[str, tuple[str, int]] = {}  # id -> (name, partitions)
        self.acls: list[str] = []
        self.scram: list[tuple[str, int]] = []
        self.tokens: list[str] = []
        self.next_pid = 0
        self.names = 0

    def _broker(self, bid: int, epoch: int) -> Any:
        ep = m.RegisterBrokerRecord.BrokerEndpoint(
            name="PLAINTEXT", host=f"b{bid}", port=9092 + bid, security_protocol=0
        )
        return m.RegisterBrokerRecord(
            broker_id=bid,
            broker_epoch=epoch,
            incarnation_id=_uuid(self.rng),
            end_points=(ep,),
            rack=self.rng.choice([None, "r1", "r2"]),
            fenced=True,
            log_dirs=(_uuid(self.rng),),
        )

    def start(self) -> list[Any]:
        out: list[Any] = [m.FeatureLevelRecord(name="metadata.version", feature_level=21)]
        ep = m.RegisterControllerRecord.ControllerEndpoint(
            name="CONTROLLER", host="c", port=9093, security_protocol=0
        )
        out.append(
            m.RegisterControllerRecord(
                controller_id=3000, incarnation_id=_uuid(self.rng), zk_migration_ready=False, end_points=(ep,)
            )
        )
        for bid in range(1, 5):
            self.brokers[bid] = 10 + bid
            out.append(self._broker(bid, self.brokers[bid]))
            out.append(m.UnfenceBrokerRecord(id=bid, epoch=self.brokers[bid]))
        return out

    def step(self, kind: str | None = None) -> list[Any]:
        """The records of one change of ``kind`` (a random one by default); a change or a deletion without
        topics creates one instead."""
        kind = kind or self.rng.choices(KINDS, k=1)[0]
        if kind == "topic" or (kind in ("change", "delete") and not self.topics):
            return self._topic()
        make = {
            "change": self._change,
            "delete": self._delete,
            "config": self._config,
            "broker": self._broker_change,
            "quota": self._quota,
            "pid": self._pid,
            "acl": self._acl,
            "scram": self._scram,
            "token": self._token,
            "feature": self._feature,
        }.get(kind, self._clear_elr)
        return make()

    def _topic(self) -> list[Any]:
        """A new topic: its TopicRecord, PartitionRecords and maybe a config."""
        rng = self.rng
        live = sorted(self.brokers)
        tid = _uuid(rng)
        self.names += 1
        name = f"t{self.names}"
        n = rng.randint(1, 4)
        self.topics[tid] = (name, n)
        out: list[Any] = [m.TopicRecord(name=name, topic_id=tid)]
        for pid in range(n):
            reps = tuple(rng.sample(live, min(3, len(live))))
            out.append(
                m.PartitionRecord(
                    partition_id=pid,
                    topic_id=tid,
                    replicas=reps,
                    isr=reps,
                    leader=reps[0],
                    leader_epoch=0,
                    partition_epoch=0,
                    directories=tuple(_uuid(rng) for _ in reps),
                )
            )
        if rng.random() < 0.5:
            out.append(
                m.ConfigRecord(
                    resource_type=2,
                    resource_name=name,
                    name="retention.ms",
                    value=str(rng.randint(1, 10**6)),
                )
            )
        return out

    def _change(self) -> list[Any]:
        """A PartitionChangeRecord: ISR, leader, replicas or ELR of a random partition."""
        rng = self.rng
        live = sorted(self.brokers)
        tid = rng.choice(sorted(self.topics))
        pid = rng.randrange(self.topics[tid][1])
        what = rng.choice(["isr", "leader", "replicas", "elr"])
        if what == "isr":
            isr = tuple(sorted(rng.sample(live, rng.randint(1, min(3, len(live))))))
            return [m.PartitionChangeRecord(partition_id=pid, topic_id=tid, isr=isr)]
        if what == "leader":
            return [m.PartitionChangeRecord(partition_id=pid, topic_id=tid, leader=rng.choice([-1, *live]))]
        if what == "elr":
            return [
                m.PartitionChangeRecord(
                    partition_id=pid,
                    topic_id=tid,
                    eligible_leader_replicas=(rng.choice(live),),
                    last_known_elr=(rng.choice(live),),
                )
            ]
        reps = tuple(rng.sample(live, min(2, len(live))))
        return [
            m.PartitionChangeRecord(
                partition_id=pid,
                topic_id=tid,
                replicas=reps,
                isr=reps,
                leader=reps[0],
                directories=tuple(_uuid(rng) for _ in reps),
            )
        ]

    def _delete(self) -> list[Any]:
        """A random topic removed."""
        rng = self.rng
        tid = rng.choice(sorted(self.topics))
        del self.topics[tid]
        return [m.RemoveTopicRecord(topic_id=tid)]

    def _config(self) -> list[Any]:
        """A cluster, broker or topic config set or deleted."""
        rng = self.rng
        rt, rn = rng.choice([(4, ""), (4, "1"), (2, next(iter(self.topics.values()), ("t0", 0))[0])])
        value = rng.choice([None, str(rng.randint(1, 99))])
        return [
            m.ConfigRecord(resource_type=rt, resource_name=rn, name=rng.choice(["a.b", "c.d"]), value=value)
        ]

    def _broker_change(self) -> list[Any]:
        """A broker registered, fenced, unfenced, shutting down or unregistered."""
        rng = self.rng
        bid = rng.randint(1, 6)
        if bid not in self.brokers:
            self.brokers[bid] = rng.randint(100, 10**6)
            return [self._broker(bid, self.brokers[bid])]
        epoch = self.brokers[bid]
        op = rng.choice(["fence", "unfence", "shutdown", "unregister"])
        if op == "unregister" and len(self.brokers) > 3:
            del self.brokers[bid]
            return [m.UnregisterBrokerRecord(broker_id=bid, broker_epoch=epoch)]
        if op == "fence":
            return [m.FenceBrokerRecord(id=bid, epoch=epoch)]
        if op == "shutdown":
            return [
                m.BrokerRegistrationChangeRecord(broker_id=bid, broker_epoch=epoch, in_controlled_shutdown=1)
            ]
        return [m.UnfenceBrokerRecord(id=bid, epoch=epoch)]

    def _quota(self) -> list[Any]:
        """A client quota set or removed."""
        rng = self.rng
        ent = (
            m.ClientQuotaRecord.EntityData(
                entity_type="user", entity_name=rng.choice([None, "alice", "bob"])
            ),
        )
        return [
            m.ClientQuotaRecord(
                entity=ent,
                key="producer_byte_rate",
                value=float(rng.randint(1, 9)),
                remove=rng.random() < 0.3,
            )
        ]

    def _pid(self) -> list[Any]:
        """The next producer id block."""
        self.next_pid += 1000
        return [
            m.ProducerIdsRecord(
                broker_id=1, broker_epoch=self.brokers.get(1, 0), next_producer_id=self.next_pid
            )
        ]

    def _acl(self) -> list[Any]:
        """An ACL added or removed."""
        rng = self.rng
        if self.acls and rng.random() < 0.4:
            return [m.RemoveAccessControlEntryRecord(id=self.acls.pop(rng.randrange(len(self.acls))))]
        aid = _uuid(rng)
        self.acls.append(aid)
        return [
            m.AccessControlEntryRecord(
                id=aid,
                resource_type=2,
                resource_name="t1",
                pattern_type=3,
                principal="User:alice",
                host="*",
                operation=3,
                permission_type=3,
            )
        ]

    def _scram(self) -> list[Any]:
        """A SCRAM credential set or removed."""
        rng = self.rng
        if self.scram and rng.random() < 0.4:
            user, mech = self.scram.pop(rng.randrange(len(self.scram)))
            return [m.RemoveUserScramCredentialRecord(name=user, mechanism=mech)]
        key = (rng.choice(["alice", "bob", "carol"]), rng.choice([1, 2]))
        if key not in self.scram:
            self.scram.append(key)
        return [
            m.UserScramCredentialRecord(
                name=key[0],
                mechanism=key[1],
                salt=rng.randbytes(8),
                stored_key=rng.randbytes(8),
                server_key=rng.randbytes(8),
                iterations=4096,
            )
        ]

    def _token(self) -> list[Any]:
        """A delegation token created or removed."""
        rng = self.rng
        if self.tokens and rng.random() < 0.4:
            return [m.RemoveDelegationTokenRecord(token_id=self.tokens.pop())]
        tok = f"tok{rng.randint(0, 10**6)}"
        self.tokens.append(tok)
        return [
            m.DelegationTokenRecord(
                owner="User:alice",
                requester="User:alice",
                renewers=("User:bob",),
                issue_timestamp=1,
                max_timestamp=2,
                expiration_timestamp=3,
                token_id=tok,
            )
        ]

    def _feature(self) -> list[Any]:
        """kraft.version finalized at 0 or 1."""
        rng = self.rng
        return [m.FeatureLevelRecord(name="kraft.version", feature_level=rng.randint(0, 1))]

    def _clear_elr(self) -> list[Any]:
        """A ClearElrRecord or a NoOp."""
        rng = self.rng
        return [m.ClearElrRecord(topic_name="")] if rng.random() < 0.5 else [m.NoOpRecord()]


def synthetic_records(seed: int, steps: int) -> list[Any]:
    """The records of a seeded synthetic log, transactions included (some aborted)."""
    rng = random.Random(seed)
    model = _Model(rng)
    out = model.start()
    for _ in range(steps):
        if rng.random() < 0.08:
            # a transaction of a few topic creations; an aborted one must leave no trace
            snapshot = (dict(model.topics), model.names)
            aborted = rng.random() < 0.3
            body = [
                r
                for _ in range(rng.randint(1, 3))
                for r in model.step(rng.choice(["topic", "change"]) if aborted else None)
                if not isinstance(r, m.NoOpRecord)
            ]
            if aborted:
                model.topics, model.names = snapshot[0], snapshot[1]
                if not body:
                    continue
            out.append(m.BeginTransactionRecord(name="txn"))
            out.extend(body)
            out.append(m.AbortTransactionRecord() if aborted else m.EndTransactionRecord())
        else:
            out.extend(model.step())
    return out


def write_synthetic_log(root: Path, seed: int = 7, steps: int = 400) -> Path:
    """Write a synthetic log as ``root/__cluster_metadata-0`` with two segments; returns that directory."""
    rng = random.Random(seed * 31 + 1)
    d = root / "__cluster_metadata-0"
    d.mkdir(parents=True, exist_ok=True)
    values = [encode_latest(r) for r in synthetic_records(seed, steps)]
    batches: list[tuple[int, bytes]] = []
    offset, epoch, ts = 0, 1, 1_700_000_000_000
    while offset < len(values):
        n = rng.randint(1, 6)
        if rng.random() < 0.05:
            epoch += 1
        ts += rng.randint(1, 500)
        batches.append((offset, build_data_batch(offset, epoch, ts, values[offset : offset + n])))
        offset += len(values[offset : offset + n])
    cut = len(batches) // 2
    for part in (batches[:cut], batches[cut:]):
        if part:
            (d / segment_filename(part[0][0])).write_bytes(b"".join(b for _, b in part))
    return d
