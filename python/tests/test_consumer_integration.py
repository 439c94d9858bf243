"""``DkgConsumer`` against the real broker: an ordering producer (the Rust ``dkg-lab loadgen
--ordering``: leases and markers on the handoff topic; this package's ``DkgProducer`` writes
neither) writes Zipf keys to a 12-partition topic while the test publishes five epoch switches that
move a third of the buckets each time; a group of Python consumers, paced unevenly so partitions lag
behind each other and joined by a third member mid-run (a rebalance during the switches), hands
records to one shared log. With ``DkgConsumer``: 0 per-key order violations and 0 records lost,
under both group protocols; with a member crashing mid-run, still none lost and every record
processed twice one the crashed member processed after its last commit. The control run, plain
``confluent_kafka.Consumer`` members in the same scenario, shows violations: the check can fail.

The scenario is ``partitioner/tests/consumer_keeps_key_order_across_epochs.rs``'s. The loadgen binary
is ``DKG_LAB_BIN`` or ``target/{debug,release}/dkg-lab`` (``cargo build -p dkg-lab``);
missing, the tests fail.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Message
from confluent_kafka.admin import AdminClient
from prometheus_client import CollectorRegistry

from dkg_kafka import DkgConsumer, EpochChange

from .conftest import REPO_ROOT, Publisher, create_topic, document, unique

PARTITIONS = 12
BUCKETS = 48
MOVING = 16
COUNT = 24_000
RATE = 3_000.0
KEYS = 400
# Per-record processing time of each member (seconds): uneven, so partitions lag differently.
PACE = (0.0, 0.0003, 0.0012)


def lab_bin() -> Path:
    candidates = [os.environ.get("DKG_LAB_BIN", "")] + [
        str(REPO_ROOT / "target" / profile / "dkg-lab") for profile in ("debug", "release")
    ]
    for c in candidates:
        if c and Path(c).is_file():
            return Path(c)
    raise RuntimeError(
        "the ordering producer is missing: set DKG_LAB_BIN or `cargo build -p dkg-lab` "
        f"(looked at {candidates})"
    )


def epoch_document(topic: str, epoch: int) -> bytes:
    """Buckets below ``MOVING`` on ``(b + 2e) % 12``, the others on ``b % 12``: every switch moves
    a third of the keys, each to a partition it has not lived on within the last 5 epochs."""
    table = [(b + 2 * epoch) % PARTITIONS if b < MOVING else b % PARTITIONS for b in range(BUCKETS)]
    return document(topic, PARTITIONS, epoch, table)


@dataclass
class Log:
    """Every record handed to the application, in global processing order."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    # (key, sequence number, member, partition, offset)
    entries: list[tuple[bytes, int, str, int, int]] = field(default_factory=list)
    seen: set[int] = field(default_factory=set)

    def add(self, msg: Message, member: str) -> None:
        value = msg.value() or b""
        seq = int(value.split(b":", 2)[1])
        with self.lock:
            self.entries.append((msg.key() or b"", seq, member, msg.partition() or 0, msg.offset() or 0))
            self.seen.add(seq)

    def count(self) -> int:
        with self.lock:
            return len(self.seen)


@dataclass
class Report:
    records: int
    lost: int
    duplicates: int
    violations: int
    examples: list[str]


def check(log: Log, sent: int) -> Report:
    """Per key, each record must come after every record of the key sent before it (the
    loadgen's sequence numbers are its send order); duplicates (a record seen before) are
    counted apart."""
    latest: dict[bytes, int] = {}
    seen: dict[int, tuple[str, int, int]] = {}
    duplicates = violations = 0
    examples: list[str] = []
    dup_where: dict[tuple[str, str, int], int] = {}
    for i, (key, seq, member, partition, _) in enumerate(log.entries):
        if seq in seen:
            duplicates += 1
            first = seen[seq]
            w = (first[0], member, partition)
            dup_where[w] = dup_where.get(w, 0) + 1
            continue
        seen[seq] = (member, partition, i)
        last = latest.get(key, -1)
        if seq < last:
            violations += 1
            if len(examples) < 5:
                examples.append(f"key {key!r}: seq {seq} (p{partition}, {member}) after {last}")
        latest[key] = max(last, seq)
    if dup_where:
        examples.append(f"duplicates (first member, second member, partition): {dup_where}")
    return Report(len(log.entries), sent - len(seen), duplicates, violations, examples)


class Member:
    """A group member in a thread: polls (``batch`` > 1: ``consume(batch)``), logs, sleeps its
    pace per record."""

    def __init__(
        self, name: str, make: Callable[[str], Any], pace: float, log: Log, batch: int = 1
    ) -> None:
        self.name, self.pace, self.log, self.batch = name, pace, log, batch
        self.client = make(name)
        self.stop = threading.Event()
        self.crash = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self.run, name=name, daemon=True)
        self.thread.start()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                if self.crash.is_set():
                    self.client._abandon()
                    return
                if self.batch > 1:
                    msgs = self.client.consume(self.batch, 0.1)
                else:
                    msg = self.client.poll(0.1)
                    msgs = [] if msg is None else [msg]
                for msg in msgs:
                    if msg.error() is not None:
                        continue
                    self.log.add(msg, self.name)
                    if self.pace:
                        time.sleep(self.pace)
        except BaseException as e:  # reported by the test
            self.error = e
        finally:
            self.client.close()

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(60)
        assert not self.thread.is_alive(), f"{self.name} did not close"
        assert self.error is None, f"{self.name}: {self.error!r}"


@dataclass
class Scenario:
    bootstrap: str
    topic: str
    control: str
    group: str
    publisher: Publisher


def run(
    scenario: Scenario,
    make_member: Callable[[str], Any],
    crash_at: int | None = None,
    log: Log | None = None,
    batch: int = 1,
) -> tuple[Report, float]:
    """Produce while switching epochs, consume with 2 members then 3 (with ``crash_at``, m0
    crashes when that epoch is published); returns the report and the seconds until every record
    was seen."""
    log = Log() if log is None else log
    members = [Member(f"m{i}", make_member, PACE[i], log, batch) for i in (0, 2)]
    loadgen = subprocess.Popen(
        [
            str(lab_bin()),
            "loadgen",
            "--bootstrap-servers", scenario.bootstrap,
            "--topic", scenario.topic,
            "--control-topic", scenario.control,
            "--alpha", "1.0",
            "--keys", str(KEYS),
            "--count", str(COUNT),
            "--rate", str(RATE),
            "--ordering",
            "--value-prefix", "p",
            "--value-bytes", "32",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "DKG_LOG": "warn"},
    )
    start = time.monotonic()
    try:
        for epoch in range(2, 7):
            time.sleep(1.2)
            scenario.publisher.publish(epoch_document(scenario.topic, epoch))
            if epoch == 3:
                # A third member joins during the switches: a rebalance mid-run.
                members.append(Member("m1", make_member, PACE[1], log, batch))
            if epoch == crash_at:
                members[0].crash.set()
        _, err = loadgen.communicate(timeout=120)
        assert loadgen.returncode == 0, f"loadgen failed: {err.decode(errors='replace')[-2000:]}"
        deadline = time.monotonic() + 120
        while log.count() < COUNT and time.monotonic() < deadline:
            time.sleep(0.2)
        elapsed = time.monotonic() - start
    finally:
        if loadgen.poll() is None:
            loadgen.kill()
        for m in members:
            m.stop.set()
        for m in members:
            m.finish()
    return check(log, COUNT), elapsed


@pytest.fixture
def scenario(bootstrap: str, admin: AdminClient, control_topic: str) -> Scenario:
    topic = create_topic(admin, unique("dkg-test-order"), PARTITIONS)
    publisher = Publisher(bootstrap, control_topic)
    publisher.publish(epoch_document(topic, 1))
    return Scenario(bootstrap, topic, control_topic, unique("dkg-test-group"), publisher)


def member_conf(scenario: Scenario, name: str, protocol: str) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": scenario.bootstrap,
        "group.id": scenario.group,
        "client.id": name,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
    }
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    return conf


def sample_sum(registry: CollectorRegistry, metric: str, sample: str) -> float:
    """The sum of the samples named ``sample`` of ``metric`` over every label set."""
    return sum(
        s.value
        for m in registry.collect()
        if m.name == metric
        for s in m.samples
        if s.name == sample
    )


# The poll() loop under both group protocols; consume(100) (one native call per fetched batch, the
# quiet partitions' batches handed back as fetched) under the classic one.
@pytest.mark.parametrize(
    ("protocol", "batch"), [("classic", 1), ("consumer", 1), ("classic", 100)],
    ids=["classic", "consumer", "classic-consume"],
)
def test_dkg_consumers_keep_each_keys_order_across_switches(
    scenario: Scenario, protocol: str, batch: int
) -> None:
    registry = CollectorRegistry()
    epochs: list[EpochChange] = []
    assigned: list[list[int]] = []
    revoked: list[list[int]] = []

    def make(name: str) -> DkgConsumer:
        c = DkgConsumer(
            member_conf(scenario, name, protocol),
            control_topic=scenario.control,
            registry=registry,
            commit_interval=1.0,
            # Pauses a partition holding more (C13), which also keeps the commit metadata's list
            # of unprocessed offsets within the broker's 4096 B: a list that does not fit is left
            # out (C7), and the next owner then re-processes what was processed past the commit.
            max_held_records=150,
            on_epoch=epochs.append,
            on_assign=assigned.append,
            on_revoke=revoked.append,
        )
        c.subscribe([scenario.topic])
        return c

    report, elapsed = run(scenario, make, batch=batch)
    how = "poll" if batch == 1 else f"consume({batch})"
    print(f"DkgConsumer ({protocol}, {how}): {report}, all seen after {elapsed:.1f} s")
    assert report.lost == 0, report
    assert report.violations == 0, report
    # No member crashed: a clean rebalance commits what was processed.
    assert report.duplicates == 0, report
    # Every record handed out is counted, under the Rust consumer's metric names.
    total = sample_sum(registry, "dkg_consumer_records", "dkg_consumer_records_total")
    assert total == report.records
    held = sample_sum(registry, "dkg_consumer_hold_seconds", "dkg_consumer_hold_seconds_count")
    print(f"held records: {held}; on_epoch calls: {len(epochs)}")
    assert held > 0, "moved keys' records were held at some switch"
    assert {c.epoch for c in epochs} >= {2, 3, 4, 5, 6}, "on_epoch ran for every switch"
    assert assigned and revoked, "the rebalance hooks ran"


def test_plain_consumers_break_key_order_in_the_same_scenario(scenario: Scenario) -> None:
    """The control: without the protocol the same run processes moved keys out of order."""

    def make(name: str) -> Consumer:
        conf = member_conf(scenario, name, "classic")
        conf["partition.assignment.strategy"] = "cooperative-sticky"
        c = Consumer(conf)
        c.subscribe([scenario.topic])
        return c

    report, elapsed = run(scenario, make)
    print(f"plain confluent_kafka.Consumer: {report}, all seen after {elapsed:.1f} s")
    assert report.lost == 0, report
    assert report.violations > 0, f"the control run kept order: the scenario proves nothing {report}"


class CommitRecorder:
    """The crashed member's client: everything forwarded, its synchronous commits recorded (the
    member commits only those: no periodic commits)."""

    def __init__(self, client: Consumer) -> None:
        self._client = client
        self.committed: dict[int, int] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def commit(self, *, offsets: list[Any], asynchronous: bool = True) -> Any:
        assert not asynchronous, "the crashing member commits synchronously only"
        out = self._client.commit(offsets=offsets, asynchronous=False)
        for tp in offsets:
            self.committed[tp.partition] = tp.offset
        return out


def test_a_crashed_member_loses_nothing_and_repeats_only_what_followed_its_last_commit(
    scenario: Scenario,
) -> None:
    """m0 crashes (no commit, no hook) when epoch 5 is published: the others take its partitions
    over from its last commits. Nothing is lost, per-key order holds, and every record processed
    twice was first processed by m0 at or after its last committed offset of that partition."""
    recorder: CommitRecorder | None = None

    def make(name: str) -> DkgConsumer:
        nonlocal recorder
        c = DkgConsumer(
            member_conf(scenario, name, "classic"),
            control_topic=scenario.control,
            commit_interval=None if name == "m0" else 1.0,
            max_held_records=150,
        )
        if name == "m0":
            recorder = CommitRecorder(c._consumer)
            c._consumer = recorder  # type: ignore[assignment]
        c.subscribe([scenario.topic])
        return c

    log = Log()
    report, elapsed = run(scenario, make, crash_at=5, log=log)
    print(f"DkgConsumer, m0 crashed: {report}, all seen after {elapsed:.1f} s")
    assert recorder is not None
    assert report.lost == 0, report
    assert report.violations == 0, report
    first: dict[int, tuple[str, int, int]] = {}
    bad = []
    for _, seq, member, partition, offset in log.entries:
        if seq not in first:
            first[seq] = (member, partition, offset)
            continue
        by, p, o = first[seq]
        if by != "m0" or o < recorder.committed.get(p, 0):
            bad.append((seq, first[seq], member))
    assert not bad, f"repeated records that were not m0's after its last commit: {bad[:5]}"
    print(f"m0's last commits: {recorder.committed}; records processed twice: {report.duplicates}")
