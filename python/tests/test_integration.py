"""Against the real broker: following the control topic, fallbacks, hostile documents, 10^6 records."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewPartitions
from prometheus_client import CollectorRegistry, generate_latest

from dkg_kafka import Assignment, DkgProducer, Router, kafka_partition

from .conftest import (
    Publisher,
    create_topic,
    document,
    generation_record,
    read_all,
    rotated,
    unique,
    v2_document,
    wait_partitions,
)

ADOPTION_TIMEOUT = 30.0


def data_topic(admin: AdminClient, partitions: int) -> str:
    return create_topic(admin, unique("dkg-test-data"), partitions)


def sample(registry: CollectorRegistry, name: str, labels: dict[str, str]) -> float | None:
    value = registry.get_sample_value(name, labels)
    return None if value is None else float(value)


def test_follows_a_published_assignment_and_reads_it_at_start(
    admin: AdminClient, publisher: Publisher, router_factory: Any
) -> None:
    topic = data_topic(admin, 4)
    router = router_factory()
    doc = rotated(topic, 4, epoch=3, shift=1)
    a = Assignment.from_json(doc)
    # Before any assignment: Kafka's placement (the client's while the count is unknown).
    assert router.partition(topic, b"hot") is None
    assert router.wait_until(lambda r: r.placement(topic) is not None, ADOPTION_TIMEOUT)
    assert router.partition(topic, b"hot") == kafka_partition(b"hot", 4)
    publisher.publish(doc)
    assert router.wait_for_epoch(topic, 3, ADOPTION_TIMEOUT), "assignment not adopted"
    for key in (b"hot", b"k1", b"k2", b""):
        assert router.partition(topic, key) == a.partition_for(key)
    assert router.partition(topic, b"hot") == 2  # the heavy key's own partition
    # A router started now has it as soon as start() returns (read to the end at start).
    late = router_factory()
    placement = late.placement(topic)
    assert placement is not None and placement.in_effect
    assert placement.assignment == a


def following(
    admin: AdminClient, publisher: Publisher, router_factory: Any, partitions: int
) -> tuple[str, Router]:
    """A data topic, a router, and epoch 1 of an assignment for the topic in effect."""
    topic = data_topic(admin, partitions)
    router: Router = router_factory()
    publisher.publish(rotated(topic, partitions, epoch=1, shift=2))
    assert router.wait_for_epoch(topic, 1, ADOPTION_TIMEOUT)
    return topic, router


def assert_kafka_placement(router: Router, topic: str, partitions: int) -> None:
    keys = [f"key-{i}".encode() for i in range(2000)] + [b"hot"]
    got = [router.partition(topic, k) for k in keys]
    assert got == [kafka_partition(k, partitions) for k in keys]


def test_falls_back_to_kafka_placement_on_a_tombstone(
    admin: AdminClient, publisher: Publisher, router_factory: Any
) -> None:
    topic, router = following(admin, publisher, router_factory, 3)
    publisher.retract(topic)
    assert router.wait_until(
        lambda r: (p := r.placement(topic)) is not None and p.assignment is None, ADOPTION_TIMEOUT
    ), "retraction not seen"
    assert_kafka_placement(router, topic, 3)
    # After a retraction a lower epoch is accepted again.
    publisher.publish(rotated(topic, 3, epoch=0, shift=1))
    assert router.wait_for_epoch(topic, 0, ADOPTION_TIMEOUT)


def test_a_document_of_another_generation_makes_the_router_read_the_topic_again(
    admin: AdminClient, publisher: Publisher, router_factory: Any
) -> None:
    """Spec 6.4 G5: the router seeks back to the beginning and applies every record again, so a
    stray document of an unknown generation leaves the generation in force and its assignment
    (without the seek the router would hold nothing)."""
    topic = data_topic(admin, 4)
    in_force, stray = "c" * 32, "d" * 32
    publisher.send(b"@generation", generation_record(in_force))
    publisher.publish(v2_document(rotated(topic, 4, epoch=5, shift=1), in_force))
    router = router_factory()
    assert router.wait_for_epoch(topic, 5, ADOPTION_TIMEOUT)
    publisher.publish(v2_document(rotated(topic, 4, epoch=9, shift=2), stray))
    # After the re-read the stray document is rejected, and epoch 5 routes again.
    assert router.wait_until(
        lambda r: r.rejected()["generation_mismatch"] == 1, ADOPTION_TIMEOUT
    ), "the control topic was not read again"
    assert router.wait_for_epoch(topic, 5, ADOPTION_TIMEOUT)


def test_falls_back_while_the_partition_count_differs(
    admin: AdminClient, publisher: Publisher, router_factory: Any
) -> None:
    topic, router = following(admin, publisher, router_factory, 3)
    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(timeout=30)
    wait_partitions(admin, topic, 5)
    assert router.wait_until(
        lambda r: (p := r.placement(topic)) is not None and p.partitions == 5, ADOPTION_TIMEOUT
    ), "partition count change not seen"
    placement = router.placement(topic)
    assert placement is not None and not placement.in_effect
    assert_kafka_placement(router, topic, 5)
    # A document for the new count takes effect.
    publisher.publish(rotated(topic, 5, epoch=2, shift=3))
    assert router.wait_for_epoch(topic, 2, ADOPTION_TIMEOUT)


def test_hostile_documents_are_rejected_and_counted_while_producing_goes_on(
    bootstrap: str, admin: AdminClient, control_topic: str, publisher: Publisher
) -> None:
    topic = data_topic(admin, 4)
    registry = CollectorRegistry()
    good = rotated(topic, 4, epoch=5, shift=1)
    publisher.publish(good)
    producer = DkgProducer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5},
        control_topic=control_topic,
        registry=registry,
        metadata_refresh_interval=0.3,
    )
    a = Assignment.from_json(good)
    stop = threading.Event()
    delivered: list[tuple[bytes, int]] = []
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.key(), msg.partition()))

    def produce() -> None:
        i = 0
        while not stop.is_set() or i < 200:  # at least 200 records, however slow the box
            producer.produce(topic, b"v", f"key-{i % 500}".encode(), on_delivery=on_delivery)
            producer.poll(0)
            i += 1
            time.sleep(0.0005)

    try:
        assert producer.router.wait_for_epoch(topic, 5, ADOPTION_TIMEOUT)
        thread = threading.Thread(target=produce)
        thread.start()
        # Rejections are labelled by topic once the router produced to it.
        assert producer.router.wait_until(lambda r: topic in r.counters(), ADOPTION_TIMEOUT)
        other = rotated("some-other-topic", 4, epoch=9, shift=0)
        hostile: list[tuple[bytes | None, bytes, str]] = [
            (topic.encode(), b"{not json", "malformed_json"),
            (topic.encode(), good.replace(b'"version":1', b'"version":3'), "unsupported_version"),
            (topic.encode(), good.replace(b'"table":[1,', b'"table":[7,'), "out_of_range"),
            (topic.encode(), good.replace(b'"buckets":64', b'"buckets":65'), "invalid"),
            (topic.encode(), other, "topic_mismatch"),
            (topic.encode(), rotated(topic, 4, epoch=4, shift=2), "stale_epoch"),
            (topic.encode(), rotated(topic, 4, epoch=5, shift=2), "epoch_conflict"),
            # One byte over the 8 MiB limit (checked before parsing).
            (topic.encode(), good + b" " * (8 * 1024 * 1024 + 1 - len(good)), "oversize"),
            # (A keyless record cannot reach a compacted topic: the broker refuses it.)
            (b"\xff\xfe", good, "bad_key"),
        ]
        for key, value, _ in hostile:
            publisher.send(key, value)
        want = Counter(reason for _, _, reason in hostile)
        assert producer.router.wait_until(
            lambda r: all(r.rejected()[k] >= n for k, n in want.items()), ADOPTION_TIMEOUT
        ), f"rejections not all counted: {producer.router.rejected()}"
        time.sleep(0.2)
        stop.set()
        thread.join()
        assert producer.flush(30) == 0
    finally:
        stop.set()
        producer.close()
    assert producer.router.rejected() == {**dict.fromkeys(producer.router.rejected(), 0), **want}
    current = producer.router.assignment(topic)
    assert current is not None and current.epoch == 5
    assert errors == []
    assert len(delivered) > 50
    assert all(p == a.partition_for(k) for k, p in delivered)
    for key, _, reason in hostile:
        label = topic if key == topic.encode() else "(other)"
        n = sum(1 for k, _, r in hostile if r == reason and k == key)
        got = sample(registry, "dkg_producer_assignments_rejected_total", {"topic": label, "reason": reason})
        assert got == n, (label, reason)
    assert sample(
        registry, "dkg_producer_assignments_rejected_total", {"topic": "(other)", "reason": "malformed_json"}
    ) == 0
    assert producer.router.rejected_by_topic()[("(other)", "bad_key")] == 1
    assert sample(registry, "dkg_producer_epoch", {"topic": topic}) == 5
    assert sample(registry, "dkg_producer_assignment_in_effect", {"topic": topic}) == 1
    age = sample(registry, "dkg_producer_assignment_age_seconds", {"topic": topic})
    assert age is not None and 0 <= age < 600
    routed = sum(
        sample(registry, "dkg_producer_records_total", {"topic": topic, "route": r}) or 0
        for r in ("heavy", "bucket", "split", "fallback")
    )
    per_partition = sum(
        sample(registry, "dkg_producer_partition_records_total", {"topic": topic, "partition": str(p)})
        or 0
        for p in range(4)
    )
    assert routed == per_partition == len(delivered)
    text = generate_latest(registry).decode()
    for name in (
        "dkg_producer_records_total",
        "dkg_producer_partition_records_total",
        "dkg_producer_epoch",
        "dkg_producer_assignment_in_effect",
        "dkg_producer_assignment_age_seconds",
        "dkg_producer_assignments_rejected_total",
    ):
        assert f"\n{name}{{" in text, name


def produce_all(producer: DkgProducer, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    for key, value in records:
        while True:
            try:
                producer.produce(topic, value, key)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0


def test_a_million_records_land_where_their_epochs_assignment_puts_them(
    bootstrap: str, admin: AdminClient, control_topic: str, publisher: Publisher
) -> None:
    partitions = 8
    topic = data_topic(admin, partitions)
    heavy = [(f"hot-{i}".encode(), i % partitions) for i in range(4)]
    docs = [
        document(topic, partitions, 1, [b % partitions for b in range(257)], heavy),
        document(
            topic,
            partitions,
            2,
            [(b * 3 + 1) % partitions for b in range(300)],
            [(k, (p + 5) % partitions) for k, p in heavy],
        ),
    ]
    assignments = [Assignment.from_json(d) for d in docs]
    publisher.publish(docs[0])
    errors: list[Any] = []
    producer = DkgProducer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 1_000_000,
            "compression.type": "lz4",
            "error_cb": errors.append,
        },
        control_topic=control_topic,
    )
    half = 500_000
    try:
        assert producer.router.wait_for_epoch(topic, 1, ADOPTION_TIMEOUT)
        for phase in (1, 2):
            # A skewed stream: 4 hot keys carry 40% of it.
            records = [
                (
                    heavy[i % 4][0] if i % 10 < 4 else f"user-{(i * 7919) % 50_000}".encode(),
                    b"%d:%d" % (phase, i),
                )
                for i in range(half)
            ]
            produce_all(producer, topic, records)
            del records
            if phase == 1:
                publisher.publish(docs[1])
                assert producer.router.wait_for_epoch(topic, 2, ADOPTION_TIMEOUT)
    finally:
        producer.close()
    assert errors == []
    messages = read_all(bootstrap, topic, partitions)
    assert len(messages) == 2 * half
    seen: set[bytes] = set()
    wrong = 0
    for msg in messages:
        value = msg.value()
        seen.add(value)
        phase = value[0] - ord("0")
        if msg.partition() != assignments[phase - 1].partition_for(msg.key()):
            wrong += 1
    assert wrong == 0
    assert len(seen) == 2 * half, "records lost or duplicated"


def test_concurrent_produce_through_assignment_swaps(bootstrap: str, admin: AdminClient) -> None:
    """Four threads produce through one DkgProducer while assignments swap under them: every record
    lands on the partition of an assignment that was in force, and none is lost.

    The threads' first quarter runs before any swap (epoch 1, shape 0 only) and their last quarter
    after the final swap (an even epoch, shape 1 only); the swaps race the middle half. So both
    shapes are used whatever the scheduling (a version that only raced 199 timed swaps against the
    threads saw every record under one shape once, on a busy CI box)."""
    topic = data_topic(admin, 6)
    router = Router({"bootstrap.servers": bootstrap})
    router._set_partition_count(topic, 6)
    shapes = [Assignment.from_json(rotated(topic, 6, e, shift=e % 2)) for e in (1, 2)]
    producer = DkgProducer({"bootstrap.servers": bootstrap, "linger.ms": 5}, router=router)
    per_thread = 20_000
    keys = [f"key-{i}".encode() for i in range(300)] + [b"hot"]
    threads_n = 4
    first_quarter_done = threading.Barrier(threads_n + 1)
    lock = threading.Lock()
    at_tail = 0
    tail_go = threading.Event()

    def produce(t: int) -> None:
        nonlocal at_tail
        for i in range(per_thread):
            if i == per_thread // 4:
                first_quarter_done.wait()
            if i == per_thread * 3 // 4:
                with lock:
                    at_tail += 1
                tail_go.wait()
            while True:
                try:
                    producer.produce(topic, b"%d:%d" % (t, i), keys[(i * 31 + t) % len(keys)])
                    break
                except BufferError:
                    producer.poll(0.01)

    assert router._apply(topic.encode(), rotated(topic, 6, 1, shift=1)).outcome == "accepted"
    threads = [threading.Thread(target=produce, args=(t,)) for t in range(threads_n)]
    for t in threads:
        t.start()
    first_quarter_done.wait()
    epoch = 1
    while True:
        epoch += 1
        assert router._apply(topic.encode(), rotated(topic, 6, epoch, shift=epoch % 2)).outcome == "accepted"
        with lock:
            everyone_waits = at_tail == threads_n
        if everyone_waits and epoch % 2 == 0:
            break  # the last swap installed shape 1 for the tail
        time.sleep(0.001)
    tail_go.set()
    for t in threads:
        t.join()
    assert producer.close() == 0
    messages = read_all(bootstrap, topic, 6)
    assert len(messages) == threads_n * per_thread
    assert len({m.value() for m in messages}) == threads_n * per_thread
    used: Counter[int] = Counter()
    for m in messages:
        key = m.key()
        by_shape = [s.partition_for(key) for s in shapes]
        assert m.partition() in by_shape, key
        if by_shape[0] != by_shape[1]:
            used[by_shape.index(m.partition())] += 1
    # Every key moves between the two shapes (the table rotates by one), so the head's and the
    # tail's records alone place a quarter of the records each under one shape.
    assert used[0] >= threads_n * per_thread // 4 and used[1] >= threads_n * per_thread // 4, used


def test_a_control_topic_created_later_is_followed(
    bootstrap: str, admin: AdminClient
) -> None:
    topic = data_topic(admin, 4)
    control = unique("dkg-test-late-control")
    router = Router(
        {"bootstrap.servers": bootstrap}, control_topic=control, metadata_refresh_interval=0.3
    ).start()
    try:
        assert router.assignment(topic) is None
        create_topic(admin, control, 1, {"cleanup.policy": "compact"})
        Publisher(bootstrap, control).publish(rotated(topic, 4, epoch=1, shift=1))
        assert router.wait_for_epoch(topic, 1, ADOPTION_TIMEOUT)
    finally:
        router.close()


def test_keyless_and_explicit_partition_records_are_left_to_the_client(
    bootstrap: str, admin: AdminClient, control_topic: str, publisher: Publisher
) -> None:
    topic = data_topic(admin, 4)
    doc = document(topic, 4, 1, [3], [(b"hot", 1)])
    publisher.publish(doc)
    registry = CollectorRegistry()
    producer = DkgProducer(
        {"bootstrap.servers": bootstrap}, control_topic=control_topic, registry=registry
    )
    try:
        assert producer.router.wait_for_epoch(topic, 1, ADOPTION_TIMEOUT)
        producer.produce(topic, b"explicit", key=b"hot", partition=2)
        for i in range(40):
            producer.produce(topic, b"keyless-%d" % i)
        # A str key is encoded as the client would; `callback` is the client's on_delivery alias.
        reports: list[Any] = []
        producer.produce(topic, b"keyed", key="hot", callback=lambda e, m: reports.append(e))
        assert producer.flush(30) == 0
        assert reports == [None]
        assert len(producer) == 0
    finally:
        producer.close()
    by_value = {m.value(): m for m in read_all(bootstrap, topic, 4)}
    assert by_value[b"explicit"].partition() == 2
    assert by_value[b"keyed"].partition() == 1 and by_value[b"keyed"].key() == b"hot"
    # Keyless records went to the client's partitioner, all delivered and none counted as routed.
    assert all(by_value[b"keyless-%d" % i].key() is None for i in range(40))
    routed = {
        r: sample(registry, "dkg_producer_records_total", {"topic": topic, "route": r})
        for r in ("heavy", "bucket", "split", "fallback")
    }
    assert routed == {"heavy": 1, "bucket": 0, "split": 0, "fallback": 0}


@pytest.mark.parametrize("mode", ["moved", "auto"])
def test_records_of_moved_keys_carry_the_epoch_header(
    bootstrap: str, admin: AdminClient, control_topic: str, publisher: Publisher, mode: str
) -> None:
    """With ``epoch_header="moved"``, after a live adoption, records of keys the new epoch moved
    carry ``dkg-epoch`` (appended after the record's own headers); the others carry none. With the
    default (``"auto"``: this package takes no part in ordering) no record carries one."""
    topic = data_topic(admin, 4)
    docs = [rotated(topic, 4, epoch=1, shift=0), rotated(topic, 4, epoch=2, shift=1, buckets=3)]
    a = [Assignment.from_json(d) for d in docs]
    publisher.publish(docs[0])
    producer = DkgProducer(
        {"bootstrap.servers": bootstrap}, control_topic=control_topic, epoch_header=mode
    )
    keys = [f"key-{i}".encode() for i in range(200)] + [b"hot"]
    try:
        assert producer.router.wait_for_epoch(topic, 1, ADOPTION_TIMEOUT)
        for k in keys:  # epoch 1 was read at start-up: its predecessor is unknown
            producer.produce(topic, b"1", k)
        publisher.publish(docs[1])
        assert producer.router.wait_for_epoch(topic, 2, ADOPTION_TIMEOUT)
        for k in keys:
            producer.produce(topic, b"2", k, headers=[("app", b"x")])
        assert producer.flush(30) == 0
    finally:
        producer.close()
    moved = {k for k in keys if a[1].partition_for(k) != a[0].partition_for(k)}
    assert moved and len(moved) < len(keys)
    messages = read_all(bootstrap, topic, 4)
    assert len(messages) == 2 * len(keys)
    for m in messages:
        key, headers = m.key(), m.headers() or []
        if m.value() == b"1":
            assert headers == [], key
        elif key in moved and mode == "moved":
            assert headers == [("app", b"x"), ("dkg-epoch", b"2")], key
        else:
            assert headers == [("app", b"x")], key
