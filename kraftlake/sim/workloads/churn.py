"""A large cluster under a controller's churn: the synthetic log the image, follow, stream and Spark benches
replay, and the replay fast-path tests.

``generate_log`` writes, as real segment files, a cluster of ``brokers`` brokers whose topics of ``per_topic``
partitions (RF 3, directories assigned) are created first, then churn as a controller writes it: ISR shrink and
expand (sometimes moving the leader), NoOps, topic configs set and deleted, brokers fenced and unfenced, topics
deleted and created again under a new id; batches of 1-20 records. Seeded: the same arguments give the same
bytes. Batch times are one millisecond an offset apart, or, with ``days``, at a real cluster's pace
(:mod:`kraftlake.sim.workloads.cluster_clock`) over about that many days. Every record replays cleanly (the generator tracks each partition's ISR and leader as the controller
would).
"""

from __future__ import annotations

import base64
import random
from pathlib import Path
from typing import Any

from kraftlake.logformat import SegmentedLog, build_data_batch
from kraftlake.protocol import messages as m
from kraftlake.records.serde import encode_metadata_record
from kraftlake.sim.workloads.cluster_clock import BURST, ClusterClock, spread_over

BROKERS = 100
PARTITIONS_PER_TOPIC = 100
BASE_TIMESTAMP = 1_700_000_000_000
"""The timestamp of the log's first batch (without a clock, each next batch's is its base offset later, in ms)."""
#: The share of churn iterations that fence or unfence a broker (see ``generate_log``'s draw).
_FENCE_SHARE = 0.9995 - 0.97


def _uuid(rng: random.Random) -> str:
    while True:
        u = base64.urlsafe_b64encode(rng.randbytes(16)).rstrip(b"=").decode()
        if not u.startswith("-") and u not in ("AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAQ"):
            return u


class _LogWriter:
    """Appends records in batches to a segmented log, counting offsets."""

    def __init__(self, directory: Path, rng: random.Random, clock: ClusterClock | None = None) -> None:
        self.log = SegmentedLog(directory, segment_bytes=256 * 1024 * 1024)
        self.rng = rng
        self.clock = clock
        self.pending: list[bytes] = []
        self.offset = 0
        self.limit = 1

    def add(self, record: Any, version: int = 0) -> None:
        self.pending.append(encode_metadata_record(record, version))
        if self.clock is not None:
            self.clock.tick(record)
        if len(self.pending) >= self.limit:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            ts = BASE_TIMESTAMP + self.offset if self.clock is None else self.clock.now
            self.log.append(build_data_batch(self.offset, 1, ts, self.pending))
            self.offset += len(self.pending)
            self.pending = []


def _register_brokers(w: _LogWriter, rng: random.Random, brokers: int) -> tuple[list[str], list[int]]:
    """Register ``brokers`` brokers (one log directory each) and unfence them; their directories and epochs."""
    dirs = [_uuid(rng) for _ in range(brokers)]
    epochs: list[int] = []
    for b in range(brokers):
        epochs.append(w.offset + len(w.pending))
        w.add(
            m.RegisterBrokerRecord(
                broker_id=b,
                incarnation_id=_uuid(rng),
                broker_epoch=epochs[b],
                end_points=(
                    m.RegisterBrokerRecord.BrokerEndpoint(
                        name="PLAINTEXT", host=f"broker-{b}", port=9092, security_protocol=0
                    ),
                ),
                features=(
                    m.RegisterBrokerRecord.BrokerFeature(
                        name="metadata.version", min_supported_version=7, max_supported_version=27
                    ),
                ),
                rack=None,
                fenced=True,
                log_dirs=(dirs[b],),
            ),
            3,
        )
    for b in range(brokers):
        w.add(m.BrokerRegistrationChangeRecord(broker_id=b, broker_epoch=epochs[b], fenced=-1))
    return dirs, epochs


class _Topics:
    """The generator's model of the topics: each one's id and each partition's ISR and leader, as the
    controller tracks them, so that every change it writes replays cleanly."""

    def __init__(
        self, w: _LogWriter, rng: random.Random, brokers: int, per_topic: int, dirs: list[str]
    ) -> None:
        self.w, self.rng, self.brokers, self.per_topic, self.dirs = w, rng, brokers, per_topic, dirs
        self.ids: list[str] = []
        self.isr: list[list[tuple[int, ...]]] = []
        self.leaders: list[list[int]] = []

    def create(self, i: int) -> None:
        """Topic ``i`` created (again, under a new id, if it exists), its partitions placed by its index."""
        w, brokers, dirs = self.w, self.brokers, self.dirs
        tid = _uuid(self.rng)
        w.add(m.TopicRecord(name=f"topic-{i:07d}", topic_id=tid))
        t_isr: list[tuple[int, ...]] = []
        t_leaders: list[int] = []
        for p in range(self.per_topic):
            first = (i * 7 + p) % brokers
            reps = (first, (first + 1) % brokers, (first + 2) % brokers)
            w.add(
                m.PartitionRecord(
                    partition_id=p,
                    topic_id=tid,
                    replicas=reps,
                    isr=reps,
                    leader=first,
                    directories=tuple(dirs[r] for r in reps),
                ),
                1,
            )
            t_isr.append(reps)
            t_leaders.append(first)
        if i < len(self.ids):
            self.ids[i], self.isr[i], self.leaders[i] = tid, t_isr, t_leaders
        else:
            self.ids.append(tid)
            self.isr.append(t_isr)
            self.leaders.append(t_leaders)


def generate_log(
    directory: Path,
    records: int,
    topics: int,
    *,
    brokers: int = BROKERS,
    per_topic: int = PARTITIONS_PER_TOPIC,
    seed: int = 0,
    days: float | None = None,
) -> int:
    """Write a synthetic, replayable cluster log of about ``records`` records; return how many it wrote.

    Records are valid in replay order (partitions exist, broker epochs match): the generator tracks the
    ISR and leader of every partition as the controller would. With ``days``, the records are spread over
    about that many days by a :class:`ClusterClock` (the same records as without).
    """
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    clock = None
    if days is not None:
        setup = 1 + brokers + topics * (per_topic + 1)
        clock = ClusterClock(BASE_TIMESTAMP, spread_over(days, records, setup, BURST * _FENCE_SHARE), seed)
    w = _LogWriter(directory, rng, clock)
    w.limit = 100
    w.add(m.FeatureLevelRecord(name="metadata.version", feature_level=27))
    dirs, epochs = _register_brokers(w, rng, brokers)
    fenced = [False] * brokers
    model = _Topics(w, rng, brokers, per_topic, dirs)
    topic_ids, isr, leaders = model.ids, model.isr, model.leaders
    for i in range(topics):
        model.create(i)
    w.flush()
    rand = rng.random
    randrange = rng.randrange
    while w.offset + len(w.pending) < records:
        w.limit = randrange(1, 21)
        x = rand()
        if x < 0.80:  # ISR shrink or expand, sometimes with a leader move
            ti = randrange(topics)
            p = randrange(per_topic)
            cur = isr[ti][p]
            leader = leaders[ti][p]
            first = (ti * 7 + p) % brokers
            reps = (first, (first + 1) % brokers, (first + 2) % brokers)
            if len(cur) > 1 and (len(cur) == 3 or rand() < 0.5):
                drop = cur[randrange(len(cur))]
                new = tuple(r for r in cur if r != drop)
            else:
                missing = [r for r in reps if r not in cur]
                if not missing:
                    continue
                new = (*cur, missing[0])
            new_leader = -2
            if leader not in new or rand() < 0.1:
                new_leader = new[0]
                leaders[ti][p] = new_leader
            isr[ti][p] = new
            w.add(m.PartitionChangeRecord(partition_id=p, topic_id=topic_ids[ti], isr=new, leader=new_leader))
        elif x < 0.90:
            w.add(m.NoOpRecord())
        elif x < 0.97:
            ti = randrange(topics)
            w.add(
                m.ConfigRecord(
                    resource_type=2,
                    resource_name=f"topic-{ti:07d}",
                    name="retention.ms",
                    value=None if rand() < 0.2 else str(randrange(3_600_000, 604_800_000)),
                )
            )
        elif x < 0.9995:
            b = randrange(brokers)
            fenced[b] = not fenced[b]
            w.add(
                m.BrokerRegistrationChangeRecord(
                    broker_id=b, broker_epoch=epochs[b], fenced=1 if fenced[b] else -1
                )
            )
        else:  # delete a topic and create it again under a new id (same placement, so churn stays valid)
            ti = randrange(topics)
            w.limit = 100
            w.add(m.RemoveTopicRecord(topic_id=topic_ids[ti]))
            model.create(ti)
    w.flush()
    w.log.flush()
    w.log.close()
    return w.offset
