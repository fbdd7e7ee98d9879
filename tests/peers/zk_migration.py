"""A ZooKeeper-mode Kafka migrated to KRaft (KIP-866), from one 3.x release's own jars (3.4 through 3.9).

`ZkMigrationCluster` runs what the release's migration guide says, on 127.0.0.1: a ZooKeeper server
(`peers.zookeeper.ZooKeeperNode`), a ZooKeeper-mode broker that creates topics, configs and a client quota in
ZooKeeper, then a KRaft controller formatted with the broker's cluster id and started with
``zookeeper.metadata.migration.enable=true``, and the broker restarted with the migration settings
(``controller.quorum.voters``, ``inter.broker.protocol.version`` of the release). The controller copies
ZooKeeper's metadata into its log (one metadata transaction from 3.6) and marks the migration done with a
``ZkMigrationStateRecord``; the cluster then runs in dual-write mode. Process handling is `ReleaseCluster`'s:
every JVM in its own session, SIGKILLed at the end.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from kraftlake.image.source import log_records
from peers.kafka import KafkaPeerError
from peers.kafka_release import Node, Release, ReleaseCluster
from peers.zookeeper import ZooKeeperNode

ZK_BROKER_STARTED = "] started (kafka.server.KafkaServer)"
"""What a ZooKeeper-mode broker logs once started (a KRaft node logs ``Kafka Server started``)."""
CONTROLLER_ID = 3000
BROKER_ID = 0


MIGRATION = 1
"""``ZkMigrationState.MIGRATION``: the metadata is in KRaft, dual writes on. 3.5 and later write it at the end of
the migration (inside its metadata transaction from 3.6); 3.4 writes it before the migrated records."""
MIGRATION_DONE = re.compile(r"Completed migration of metadata from Zoo[Kk]eeper to KRaft")
"""What the controller's ``KRaftMigrationDriver`` logs once every migrated record is committed (3.4-3.9)."""


class ZkMigrationCluster(ReleaseCluster):
    """ZooKeeper, one KRaft controller (id 3000) and one migrating ZooKeeper-mode broker (id 0) of `release`."""

    def __init__(self, release: Release, workdir: Path, *, snapshot_bytes: int = 1024) -> None:
        if not release.zk_migration:
            raise ValueError(f"Kafka {release.version} cannot migrate from ZooKeeper (3.4 through 3.9 can)")
        super().__init__(release, workdir, nodes=2, snapshot_bytes=snapshot_bytes, heap="256m")
        a, b = self.nodes[1], self.nodes[2]
        self.nodes = {
            CONTROLLER_ID: Node(CONTROLLER_ID, a.broker_port, a.controller_port, self.workdir / "controller"),
            BROKER_ID: Node(BROKER_ID, b.broker_port, b.controller_port, self.workdir / "broker"),
        }
        self.zookeeper = ZooKeeperNode(release, self.workdir / "zookeeper")
        self.migrating = False

    @property
    def controller(self) -> Node:
        return self.nodes[CONTROLLER_ID]

    @property
    def broker(self) -> Node:
        return self.nodes[BROKER_ID]

    @property
    def voters(self) -> str:
        return f"{CONTROLLER_ID}@{self.controller.controller}"

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.broker.broker_port}"

    def _properties(self, node: Node) -> str:
        common = (
            f"log.dirs={node.log_dir}\nnum.network.threads=1\nnum.io.threads=2\nbackground.threads=2\n"
            "num.partitions=1\nlog.cleaner.enable=false\noffsets.topic.replication.factor=1\n"
            "offsets.topic.num.partitions=1\ntransaction.state.log.replication.factor=1\n"
            "transaction.state.log.min.isr=1\ngroup.initial.rebalance.delay.ms=0\n"
            f"zookeeper.connect={self.zookeeper.connect}\n"
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
            f"metadata.log.max.record.bytes.between.snapshots={self.snapshot_bytes}\n"
            f"metadata.log.max.snapshot.interval.ms={self.snapshot_interval_ms}\n"
            "metadata.log.segment.ms=5000\n"
        )
        migration = (
            "zookeeper.metadata.migration.enable=true\n"
            f"controller.quorum.voters={self.voters}\ncontroller.listener.names=CONTROLLER\n"
        )
        if node.node_id == CONTROLLER_ID:
            return (
                f"process.roles=controller\nnode.id={CONTROLLER_ID}\n"
                f"listeners=CONTROLLER://{node.controller}\n" + migration + common
            )
        ibp = ".".join(self.release.version.split(".")[:2])
        return (
            f"broker.id={BROKER_ID}\nlisteners=PLAINTEXT://127.0.0.1:{node.broker_port}\n"
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{node.broker_port}\n"
            f"inter.broker.protocol.version={ibp}\nbroker.rack=rack-0\n"
            + (migration if self.migrating else "")
            + common
        )

    def format(self) -> None:
        """Format the controller with the ZooKeeper cluster's id (what the broker wrote in its meta.properties;
        ``--cluster-id=`` as one word: a random id may start with ``-``)."""
        node = self.controller
        node.workdir.mkdir(parents=True, exist_ok=True)
        node.config.write_text(self._properties(node))
        self.release.run(
            "kafka.tools.StorageTool", ["format", f"--cluster-id={self.cluster_id}", "-c", str(node.config)]
        )

    def launch(self, timeout: float) -> None:
        """ZooKeeper; the broker in ZooKeeper mode with `zookeeper_workload`; then the controller and the broker
        restarted as a migrating one; wait until the controller says the migration is done."""
        self.zookeeper.start()
        broker = self.broker
        broker.workdir.mkdir(parents=True, exist_ok=True)
        broker.config.write_text(self._properties(broker))
        self._spawn(broker)
        self._wait_started([broker], timeout, ZK_BROKER_STARTED)
        self.zookeeper_workload()
        meta = (broker.log_dir / "meta.properties").read_text()
        self.cluster_id = next(
            line.split("=", 1)[1] for line in meta.splitlines() if line.startswith("cluster.id=")
        )
        self._terminate(broker, timeout)
        self.migrating = True
        self.format()
        self._spawn(self.controller)
        self._wait_started([self.controller], timeout)
        broker.config.write_text(self._properties(broker))
        self._spawn(broker)
        self._wait_started([broker], timeout, ZK_BROKER_STARTED)
        self.wait_for_migration(timeout)

    def _terminate(self, node: Node, timeout: float) -> None:
        """Stop a node with SIGTERM (a controlled shutdown: its ZooKeeper registration goes with it)."""
        if node.process is None:
            return
        node.process.terminate()
        try:
            node.process.wait(timeout)
        except Exception as exc:
            raise KafkaPeerError(f"node {node.node_id} did not stop within {timeout:.0f}s") from exc

    def zookeeper_workload(self) -> None:
        """What the ZooKeeper cluster holds before the migration: two topics, a topic config, a client quota."""
        self.create_topic("zk-orders", 3)
        self.create_topic("zk-scratch", 1)
        r = self.release
        boot = ["--bootstrap-server", self.bootstrap_servers, "--alter"]
        r.run(
            r.config_command,
            [
                *boot,
                "--entity-type",
                "topics",
                "--entity-name",
                "zk-orders",
                "--add-config",
                "retention.ms=3600000",
            ],
        )
        r.run(
            r.config_command,
            [
                *boot,
                "--entity-type",
                "clients",
                "--entity-name",
                "app1",
                "--add-config",
                "consumer_byte_rate=2048",
            ],
        )

    def dual_write_workload(self) -> None:
        """After the migration, through the broker: a topic created and given partitions, one deleted."""
        self.create_topic("kr-events", 2)
        self.topics("--alter", "--topic", "kr-events", "--partitions", "3")
        self.topics("--delete", "--topic", "zk-scratch")

    def migration_states(self) -> list[tuple[int, int]]:
        """(offset, state) of every ``ZkMigrationStateRecord`` in the controller's log."""
        return [
            (r.offset, r.record.zk_migration_state)  # type: ignore[union-attr]
            for r in log_records(self.controller.metadata_dir)
            if r.type == "ZkMigrationStateRecord"
        ]

    def wait_for_migration(self, timeout: float) -> int:
        """The offset of the ``ZkMigrationStateRecord`` of state MIGRATION, once the controller says the
        migration is done (`MIGRATION_DONE` in its log); waits for both."""
        deadline = time.monotonic() + timeout
        while True:
            done = self.controller.server_log.exists() and MIGRATION_DONE.search(
                self.controller.server_log.read_text(errors="replace")
            )
            states = self.migration_states()
            if done:
                for offset, state in states:
                    if state == MIGRATION:
                        return offset
            if time.monotonic() > deadline:
                raise KafkaPeerError(
                    f"Kafka {self.release.version}: migration not done within {timeout:.0f}s "
                    f"(states {states}):\n{self.tail(self.controller)}"
                )
            time.sleep(0.3)

    def log_end(self) -> int:
        """The offset after the last record of the controller's log."""
        return max(r.offset for r in log_records(self.controller.metadata_dir)) + 1

    def kill_all(self) -> None:
        super().kill_all()
        self.zookeeper.kill()
