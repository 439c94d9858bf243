"""The consumer glue with the Rust core, without a broker: the binding's decisions (hold, release in
order, commits that never skip a held record, progress records) and ``DkgConsumer``'s I/O around
them (poll, consume, commit, revocation) over a scripted stand-in for ``confluent_kafka.Consumer``."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, cast

import pytest
from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

import dkg_kafka
from dkg_kafka import _native
from dkg_kafka.consumer import DkgConsumer, committed_metadata, consumer_config

from .conftest import REPO_ROOT, FakeMsg, document

TOPIC = "orders"
GROUP = "billing"
PRODUCER = "a" * 32


def assignment(epoch: int, hot_on: int, partitions: int = 2) -> _native.Assignment:
    """Every bucket on partition 0, key ``hot`` on ``hot_on``."""
    return _native.Assignment.from_json(
        document(TOPIC, partitions, epoch, [0] * 8, [(b"hot", hot_on)])
    )


def lease(first_epoch: int = 0) -> tuple[bytes, bytes]:
    value = {
        "producer": PRODUCER,
        "topic": TOPIC,
        "first_epoch": first_epoch,
        "lease_ms": 30_000,
        "expires_at_ms": int(time.time() * 1000) + 60_000,
        "mode": "marker",
    }
    return f"lease2/{TOPIC}/{PRODUCER}".encode(), json.dumps(value).encode()


def marker(epoch: int, ends: Sequence[int]) -> tuple[bytes, bytes]:
    value = {"producer": PRODUCER, "topic": TOPIC, "epoch": epoch, "ends": list(ends)}
    return f"marker/{TOPIC}/{PRODUCER}".encode(), json.dumps(value).encode()


def progress(partition: int, drained: int, group: str = GROUP) -> tuple[bytes, bytes]:
    value = {
        "group": group,
        "topic": TOPIC,
        "partition": partition,
        "drained": drained,
        "passed": {PRODUCER: drained},
        "committed_offset": 10,
        "updated_at_ms": 0,
    }
    return f"progress/{group}/{TOPIC}/{partition}".encode(), json.dumps(value).encode()


def switched_core() -> _native.ConsumerCore:
    """A member owning partition 1 of 2; ``hot`` moved from 0 to 1 at epoch 2, by a producer
    with a live lease: partition 0 (another member's) has not drained epoch 2."""
    core = _native.ConsumerCore(TOPIC, GROUP, 2)
    core.on_assignment(assignment(1, 0))
    core.on_assignment(assignment(2, 1))
    assert core.on_handoff(*lease()) == "lease"
    assert core.assign(1, None, None) is None
    return core


def test_a_moved_keys_record_is_held_until_its_old_partition_drained() -> None:
    core = switched_core()
    held = FakeMsg(1, 0, b"hot", epoch=2)
    assert core.offer(held) is False, "held: partition 0 has not drained epoch 2"
    assert core.held_counts() == [(1, 1)]
    # The commit never skips the held record.
    snap = core.snapshot(1)
    assert isinstance(snap, _native.CommitSnapshot)
    assert snap.offset == 0
    # Records of other keys go past it (keys are independent), the commit stays below the held one.
    other = FakeMsg(1, 1, b"cold")
    assert core.offer(other) is True
    assert core.take() is None, "nothing released yet; `other` is now processed"
    snap = core.snapshot(1)
    assert isinstance(snap, _native.CommitSnapshot) and snap.offset == 0
    # A second record of the moved key queues behind the first (its order).
    second = FakeMsg(1, 2, b"hot", epoch=2)
    assert core.offer(second) is False
    # Another group's progress changes nothing; this group's does.
    assert core.on_handoff(*progress(0, 2, group="other")) == "progress"
    assert core.take() is None
    assert core.on_handoff(*progress(0, 2)) == "progress"
    assert core.take() is held
    assert core.take() is second, "released in order"
    assert core.take() is None
    assert core.held_counts() == [(1, 0)]
    snap = core.snapshot(1)
    assert isinstance(snap, _native.CommitSnapshot) and snap.offset == 3
    assert sum(core.records()) == 3
    assert len(core.take_hold_times()) == 2


def test_epoch_header_rules_and_unowned_records() -> None:
    core = switched_core()
    # The last well-formed dkg-epoch counts (C1): a malformed later one is ignored.
    msg = FakeMsg(1, 0, b"hot")
    msg._h = [("dkg-epoch", b"2"), ("dkg-epoch", b"x1")]
    assert core.offer(msg) is False
    # Unowned partition: dropped, the next owner reads it.
    assert core.offer(FakeMsg(0, 0, b"hot", epoch=2)) is False
    assert core.owned() == [1]
    # The same decision through offer_record (parts given).
    assert core.offer_record(1, 1, b"hot", 2, "third") is False
    assert core.held_counts() == [(1, 2)]


def test_drained_epochs_commit_and_announce() -> None:
    """A partition passing a producer's marker drains the epoch: the hooks' EpochChange, the
    commit snapshot, and the progress record to announce after the commit."""
    core = _native.ConsumerCore(TOPIC, GROUP, 2)
    core.on_assignment(assignment(1, 0))
    core.on_assignment(assignment(2, 1))
    core.on_handoff(*lease())
    core.assign(0, None, None)
    assert core.initial_progress(0) is not None
    assert core.offer(FakeMsg(0, 0, b"hot", epoch=1)) is True
    # The marker of epoch 2 ends right after offset 0 on partition 0.
    assert core.on_handoff(*marker(2, [1, 0])) == "marker"
    assert core.offer(FakeMsg(0, 1, b"cold")) is True
    assert core.take() is True, "a progress commit is due"
    assert core.progress_due() == [0]
    changes = core.take_drained_epochs(0)
    assert [c.epoch for c in changes] == [1, 2], "oldest first"
    change = changes[-1]
    assert (change.epoch, change.partition, change.owned) == (2, 0, [0])
    assert change.moved(b"hot") and change.moved_out(b"hot") and not change.moved_in(b"hot")
    assert change.partition_before(b"hot") == 0 and change.partition_after(b"hot") == 1
    assert change.prev is not None and change.prev.epoch == 1
    snap = core.snapshot(0)
    assert isinstance(snap, _native.CommitSnapshot)
    assert (snap.offset, snap.drained) == (2, 2), "take() processed the application's record"
    assert json.loads(snap.metadata)["d"] == 2
    record = core.committed(snap)
    assert record is not None
    key, value = record
    assert key == f"progress/{GROUP}/{TOPIC}/0".encode()
    announced = json.loads(value)
    assert (announced["drained"], announced["committed_offset"]) == (2, 2)
    assert core.progress_due() == []
    # The committed metadata restores the progress on a new owner.
    other = _native.ConsumerCore(TOPIC, GROUP, 2)
    other.on_assignment(assignment(1, 0))
    other.on_assignment(assignment(2, 1))
    other.on_handoff(*lease())
    assert other.assign(0, snap.offset, snap.metadata) is None
    initial = other.initial_progress(0)
    assert initial is not None and json.loads(initial[1])["drained"] == 2
    assert other.assign(1, 5, "not-metadata{") is not None, "unreadable metadata: a warning"


def test_bad_handoff_records_and_rejected_markers() -> None:
    core = switched_core()
    with pytest.raises(ValueError):
        core.on_handoff(b"nonsense", b"{}")
    assert core.on_handoff(f"marker/{TOPIC}/{PRODUCER}".encode(), b"{") == (
        "marker_rejected:malformed_json"
    )
    assert core.on_handoff(b"lease2/elsewhere/" + PRODUCER.encode(), None) == "other_topic"
    unknown, clamped, rejected, left_out = core.take_anomalies()
    assert (unknown, clamped, rejected["malformed_json"], left_out) == (0, 0, 1, 0)


def test_unknown_epoch_is_released_after_the_wait() -> None:
    """C19 with the caller's clock: a record of an epoch never learnt waits, then goes."""
    core = _native.ConsumerCore(TOPIC, GROUP, 2, unknown_epoch_wait=3.0)
    core.set_clock(0.0, int(time.time() * 1000))
    core.on_assignment(assignment(1, 0))
    core.assign(1, None, None)
    msg = FakeMsg(1, 0, b"hot", epoch=9)
    assert core.offer(msg) is False
    core.set_clock(2.0, int(time.time() * 1000))
    core.tick()
    assert core.take() is None
    core.set_clock(3.5, int(time.time() * 1000))
    core.tick()
    assert core.take() is msg
    assert core.take_anomalies()[0] == 1


# -- the glue over a scripted client ----------------------------------------------------------


class FakeClient:
    """A stand-in for ``confluent_kafka.Consumer``: scripted records, recorded commits."""

    def __init__(self, records: list[Any]) -> None:
        self.records = list(records)
        self.commits: list[list[tuple[int, int, str | None]]] = []
        self.paused: list[int] = []

    def poll(self, timeout: float = -1) -> Any:
        return self.records.pop(0) if self.records else None

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        out, self.records = self.records[:num_messages], self.records[num_messages:]
        return out

    def commit(self, *, offsets: list[TopicPartition], asynchronous: bool = True) -> Any:
        self.commits.append([(tp.partition, tp.offset, tp.metadata) for tp in offsets])
        return None if asynchronous else offsets

    def pause(self, tps: list[TopicPartition]) -> None:
        self.paused.extend(tp.partition for tp in tps)

    def resume(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            self.paused.remove(tp.partition)

    def get_watermark_offsets(self, tp: TopicPartition, cached: bool = False) -> tuple[int, int]:
        return 0, 100

    def committed(self, tps: list[TopicPartition], timeout: float = -1) -> list[TopicPartition]:
        return [TopicPartition(TOPIC, tp.partition, -1001) for tp in tps]

    def close(self) -> None:
        pass


def glue(records: list[Any], core: _native.ConsumerCore, **hooks: Any) -> tuple[DkgConsumer, FakeClient]:
    c = DkgConsumer({"group.id": GROUP, "bootstrap.servers": "127.0.0.1:1"}, commit_interval=None, **hooks)
    client = FakeClient(records)
    c._consumer.close()
    c._consumer = client  # type: ignore[assignment]
    c._core = core
    c.topic = TOPIC
    return c, client


def test_poll_hands_out_released_records_and_commits_only_what_is_safe() -> None:
    core = switched_core()
    held, cold = FakeMsg(1, 0, b"hot", epoch=2), FakeMsg(1, 1, b"cold")
    c, client = glue([held, cold], core)
    assert c.poll(0.05) is cold, "the held record waits, the other key goes"  # type: ignore[comparison-overlap]
    assert c.poll(0.05) is None
    c.commit(asynchronous=False)
    assert client.commits[-1][0][:2] == (1, 0), "never past the held record"
    c._events.append(progress(0, 2))
    assert c.poll(0.05) is held, "released once the old partition drained"  # type: ignore[comparison-overlap]
    c.commit()
    assert client.commits[-1][0][:2] == (1, 2)


def test_consume_returns_batches_and_the_revocation_commits() -> None:
    core = _native.ConsumerCore(TOPIC, GROUP, 2)
    core.on_assignment(assignment(1, 0))
    revoked: list[list[int]] = []
    assigned: list[list[int]] = []
    c, client = glue(
        [FakeMsg(0, i, b"k%d" % i) for i in range(5)],
        core,
        on_revoke=revoked.append,
        on_assign=assigned.append,
    )
    c._on_assign(client, [TopicPartition(TOPIC, 0)])  # type: ignore[arg-type]
    assert assigned == [[0]] and core.owned() == [0]
    batch = c.consume(3, 0.05)
    assert [m.offset() for m in batch] == [0, 1, 2]
    # Committing means the batch was processed: all of it is covered.
    c.commit()
    assert client.commits[-1][0][:2] == (0, 3)
    batch = c.consume(10, 0.05)
    assert [m.offset() for m in batch] == [3, 4]
    # A revocation runs inside the client's next call, when the application asked again: the
    # batch is processed then.
    c._on_revoke(client, [TopicPartition(TOPIC, 0)])  # type: ignore[arg-type]
    assert revoked == [[0]] and core.owned() == []
    assert client.commits[-1][0][:2] == (0, 5)


def holding_three(max_metadata_bytes: int) -> _native.ConsumerCore:
    """``switched_core`` holding ``hot`` at 0-2 on partition 1: the commit at 0 has a window."""
    core = _native.ConsumerCore(TOPIC, GROUP, 2, max_metadata_bytes=max_metadata_bytes)
    core.on_assignment(assignment(1, 0))
    core.on_assignment(assignment(2, 1))
    assert core.on_handoff(*lease()) == "lease"
    assert core.assign(1, None, None) is None
    for o in range(3):
        assert core.offer(FakeMsg(1, o, b"hot", epoch=2)) is False
    core.take_anomalies()
    return core


def test_a_commit_that_leaves_out_its_window_is_counted_and_warned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fits = holding_three(4096)
    snap = fits.snapshot(1)
    assert isinstance(snap, _native.CommitSnapshot)
    assert '"n":3,"u":[0,1,2]' in snap.metadata and snap.window_left_out is None
    assert fits.take_anomalies()[3] == 0, "it fits: nothing counted"

    limit = len(snap.metadata) - 1
    core = holding_three(limit)
    c, client = glue([], core, max_metadata_bytes=limit)
    with caplog.at_level("WARNING", logger="dkg_kafka"):
        c.commit(asynchronous=False)
        c.commit(asynchronous=False)
    left_out = [m for commit in client.commits for p, o, m in commit if p == 1 and o == 0]
    assert len(left_out) >= 2 and all(m is not None and '"n"' not in m for m in left_out)
    warned = [r.getMessage() for r in caplog.records if "skip window" in r.getMessage()]
    assert len(warned) == 1, f"once a minute per partition: {warned}"
    assert f"commit of {TOPIC}-1 at offset 0 leaves out its skip window (3 unprocessed" in warned[0]
    assert f"{limit}-byte metadata limit" in warned[0] and "max_held_records" in warned[0]
    c.metrics.update(client, TOPIC, core)  # type: ignore[arg-type]
    assert c.metrics.windows_left_out == len(left_out), "one per commit that left it out"
    snap = core.snapshot(1)
    assert isinstance(snap, _native.CommitSnapshot) and snap.window_left_out == 3


def test_config_sets_the_protocols_keys() -> None:
    classic = consumer_config({"group.id": "g", "partition.assignment.strategy": "range"})
    assert classic["partition.assignment.strategy"] == "cooperative-sticky"
    assert classic["enable.auto.commit"] is False and classic["enable.auto.offset.store"] is False
    kip848 = consumer_config({"group.id": "g", "group.protocol": "consumer"})
    assert "partition.assignment.strategy" not in kip848
    with pytest.raises(ValueError):
        consumer_config({})
    c = DkgConsumer({"group.id": "g", "bootstrap.servers": "127.0.0.1:1"})
    with pytest.raises(ValueError, match="exactly one topic"):
        c.subscribe(["a", "b"])
    c._consumer.close()
    assert dkg_kafka.DkgConsumer is DkgConsumer


def real_message(partition: int, offset: int, key: bytes, epoch: int | None = None) -> Any:
    """A ``confluent_kafka.Message`` of ``TOPIC`` (the binding reads it through its accessors' C
    functions); skips the test where the installed confluent-kafka cannot construct one."""
    headers: list[tuple[str, str | bytes | None]] | None = (
        None if epoch is None else [("dkg-epoch", str(epoch).encode())]
    )
    try:
        return Message(topic=TOPIC, partition=partition, offset=offset, key=key, value=b"v", headers=headers)
    except TypeError:
        pytest.skip("this confluent-kafka cannot construct a Message")


def test_released_hands_a_quiet_batch_back_as_it_is_and_holds_a_moved_key() -> None:
    core = _native.ConsumerCore(TOPIC, GROUP, 2)
    core.on_assignment(assignment(1, 0))
    assert core.on_handoff(*lease()) == "lease"
    for p in (0, 1):
        assert core.assign(p, None, None) is None
    # Each partition's first record goes through the core (fetching starts: its lane opens).
    warm = [real_message(0, 0, b"a"), real_message(1, 0, b"b")]
    assert core.released(warm, 10, True) == warm
    # No switch in progress: the fetched batch itself comes back, the core not asked.
    quiet = [real_message(0, 1, b"a"), real_message(1, 1, b"d"), real_message(0, 2, b"c")]
    assert core.released(quiet, 10, True) is quiet
    assert core.records() == [3, 2]
    # `hot` moves from 0 to 1 at epoch 2: its record on 1 waits for partition 0 to drain epoch 2;
    # the other keys' records go past it, in order.
    core.on_assignment(assignment(2, 1))
    held = real_message(1, 2, b"hot", epoch=2)
    batch = [real_message(1, 3, b"x"), held, real_message(1, 4, b"y")]
    got = core.released(batch, 10, False)
    assert got is not None and [m.offset() for m in got] == [3, 4]
    assert core.held_counts() == [(0, 0), (1, 1)]
    snap = core.snapshot(1)
    assert isinstance(snap, _native.CommitSnapshot) and snap.offset == 2, "the commit stays below the held record"
    # Partition 0 drains epoch 2 (a marker past its records): the held record comes out first.
    assert core.on_handoff(*marker(2, [3, 0])) == "marker"
    after = real_message(0, 3, b"a", epoch=2)
    got = core.released([after], 10, False)
    assert got is not None and got[0] is after
    # Its drained epoch is committed (DkgConsumer._commit_progress) before the moved key goes on.
    assert core.released(None, 10, True) is None, "a progress commit is due"
    for p in core.progress_due():
        core.take_drained_epochs(p)
        snap = core.snapshot(p)
        assert isinstance(snap, _native.CommitSnapshot)
        core.committed(snap)
    assert core.released(None, 10, True) == [held]


class _GarbledMetadata:
    """What ``Consumer.committed`` can return for metadata committed without a trailing NUL (by the
    Java or Rust consumers): confluent-kafka reads past librdkafka's unterminated copy, here into
    bytes that do not decode."""

    topic = "t"
    partition = 0
    offset = 5

    @property
    def metadata(self) -> str:
        raise UnicodeDecodeError("utf-8", b'{"v":1,"d":2}\xaa\x01', 13, 14, "invalid start byte")


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ('{"v":1,"d":2}', '{"v":1,"d":2}'),
        # Bytes read past the end of the committed value that happen to decode.
        ('{"v":1,"d":2,"p":{}}Ab{"', '{"v":1,"d":2,"p":{}}'),
        (None, None),
        ("", None),
        # Not the protocol's: passed on as read (the core ignores it, with a warning).
        ("committed by another tool", "committed by another tool"),
        ('{"v":1,', '{"v":1,'),
    ],
)
def test_committed_metadata_is_the_json_object_committed(
    metadata: str | None, expected: str | None
) -> None:
    tp = TopicPartition("t", 0, 5) if metadata is None else TopicPartition("t", 0, 5, metadata=metadata)
    assert committed_metadata(tp) == expected


def test_committed_metadata_that_does_not_decode_is_read_up_to_the_json_objects_end() -> None:
    assert committed_metadata(cast(TopicPartition, _GarbledMetadata())) == '{"v":1,"d":2}'



def _garbage_cases() -> dict[str, Any]:
    """The shared cases of handoff garbage collection (``spec/garbage/cases.json``, read by the
    Rust and Java tests too)."""
    path = REPO_ROOT / "spec" / "garbage" / "cases.json"
    cases: dict[str, Any] = json.loads(path.read_text())
    return cases


@pytest.mark.parametrize("case", _garbage_cases()["lease_cases"], ids=lambda c: str(c["name"]))
def test_garbage_is_a_lease_expired_long_ago_with_its_marker(case: dict[str, Any]) -> None:
    cases = _garbage_cases()
    topic, producer = cases["topic"], cases["producer"]
    core = _native.ConsumerCore(topic, GROUP, 2, max_lease=cases["max_lease_ms"] / 1000)
    core.set_clock(0.0, cases["read_at_ms"])
    lease = dict(case["lease"], producer=producer, topic=topic, first_epoch=1)
    assert core.on_handoff(f"lease2/{topic}/{producer}".encode(), json.dumps(lease).encode()) == "lease"
    m = {"producer": producer, "topic": topic, "epoch": 2, "ends": [0, 0]}
    assert core.on_handoff(f"marker/{topic}/{producer}".encode(), json.dumps(m).encode()) == "marker"
    assert core.assign(0, None, None) is None
    core.set_clock(0.0, case["now_ms"])
    want = [f"marker/{topic}/{producer}", f"lease2/{topic}/{producer}"] if case["collected"] else []
    assert core.garbage() == want


def test_garbage_is_history_below_the_epochs_every_member_keeps() -> None:
    cases = _garbage_cases()
    topic = cases["topic"]
    assert len(cases["history_cases"]) >= 4, "the shared cases are all there"
    for case in cases["history_cases"]:
        core = _native.ConsumerCore(topic, GROUP, 2, history=case["keep"])
        for epoch in case["epochs"]:
            key = f"assignment/{topic}/{epoch}".encode()
            assert core.on_handoff(key, document(topic, 2, epoch, [0, 1])) == "history"
        for epoch in case["tombstoned"]:
            assert core.on_handoff(f"assignment/{topic}/{epoch}".encode(), None) == "removed"
        want = [f"assignment/{topic}/{e}" for e in case["collected"]]
        assert core.garbage() == want, case["name"]


class RebalancingClient(FakeClient):
    """A client whose close serves the final revocation while the group rebalances (members
    leaving together): every commit after the first ``ok_commits`` fails."""

    def __init__(self, records: list[Any], ok_commits: int) -> None:
        super().__init__(records)
        self.ok_commits = ok_commits
        self.revoke: Any = None

    def commit(self, *, offsets: list[TopicPartition], asynchronous: bool = True) -> Any:
        if len(self.commits) >= self.ok_commits:
            raise KafkaException(KafkaError(KafkaError.ILLEGAL_GENERATION))
        return super().commit(offsets=offsets, asynchronous=asynchronous)

    def close(self) -> None:
        self.revoke(self, [TopicPartition(TOPIC, 0)])


@pytest.mark.parametrize(("ok_commits", "raises"), [(1, False), (0, True)])
def test_close_raises_only_when_the_failed_final_commit_loses_something(
    ok_commits: int, raises: bool
) -> None:
    core = _native.ConsumerCore(TOPIC, GROUP, 2)
    core.on_assignment(assignment(1, 0))
    c = DkgConsumer({"group.id": GROUP, "bootstrap.servers": "127.0.0.1:1"}, commit_interval=None)
    c._consumer.close()
    client = RebalancingClient([FakeMsg(0, i, b"k%d" % i) for i in range(3)], ok_commits)
    client.revoke = c._on_revoke
    c._consumer = client  # type: ignore[assignment]
    c._core = core
    c.topic = TOPIC
    c._on_assign(client, [TopicPartition(TOPIC, 0)])  # type: ignore[arg-type]
    assert [m.offset() for m in c.consume(3, 0.05)] == [0, 1, 2]
    if raises:
        # Close's own commit failed too: the records since the last commit go to the next owner.
        with pytest.raises(KafkaException, match="final commit on close"):
            c.close()
    else:
        # Close committed offset 3 before the revocation's repeat failed: nothing is lost.
        c.close()
        assert client.commits[-1][0][:2] == (0, 3)
