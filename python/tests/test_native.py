"""Unit tests of the Rust extension: decoding, lookup, fallback, counters, helpers."""

from __future__ import annotations

import json
import random

import pytest

import dkg_kafka
from dkg_kafka import Assignment, AssignmentBook, AssignmentError, Placement, RouteCounters
from dkg_kafka import _native

from .conftest import document


def murmur2_py(data: bytes, seed: int = 0x9747B28C) -> int:
    """Kafka's murmur2, written from the spec, as an unsigned 32-bit value."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    h = (seed ^ len(data)) & mask
    n4 = len(data) // 4 * 4
    for i in range(0, n4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    tail = data[n4:]
    if len(tail) >= 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h ^= tail[0]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h


def test_murmur2_and_kafka_partition_match_the_spec_formula() -> None:
    rng = random.Random(7)
    for n in range(200):
        key = rng.randbytes(n % 70)
        h = murmur2_py(key)
        signed = h - (1 << 32) if h >= 1 << 31 else h
        assert dkg_kafka.murmur2(key) == signed
        for partitions in (1, 3, 12, 1000):
            assert dkg_kafka.kafka_partition(key, partitions) == (h & 0x7FFFFFFF) % partitions
    with pytest.raises(ValueError):
        dkg_kafka.kafka_partition(b"k", 0)


def test_fields_round_trip() -> None:
    doc = document("orders", 3, 7, [0, 1, 2, 0], [(b"hot", 1)], seed=99, created_at_ms=5)
    a = Assignment.from_json(doc)
    assert (a.topic, a.partitions, a.epoch, a.buckets) == ("orders", 3, 7, 4)
    assert a.table == [0, 1, 2, 0]
    assert a.bucket_hash == ("murmur2", 99)
    assert a.heavy == [(b"hot", 1, 100)]
    assert a.created_at_ms == 5
    assert a.predicted_load == pytest.approx([1 / 3] * 3)
    assert Assignment.from_json(a.to_json()) == a
    assert json.loads(a.to_json())["epoch"] == 7
    assert "epoch=7" in repr(a)


def test_lookup_is_heavy_for_exact_keys_and_the_bucket_table_otherwise() -> None:
    table = [(b * 7) % 5 for b in range(101)]
    heavy = [(b"hot", 4), (b"", 3), (b"x" * 40, 2), (b"\x00\x01\x00", 1)]
    a = Assignment.from_json(document("t", 5, 1, table, heavy, seed=12345))
    for key, partition in heavy:
        assert a.route(key) == (partition, "heavy")
    for key in (b"hot!", b"ho", b"x" * 39, b"x" * 41, b"\x00\x01\x00\x00", b"cold"):
        bucket = (murmur2_py(key, 12345) & 0x7FFFFFFF) % 101
        assert a.bucket(key) == bucket
        assert a.route(key) == (table[bucket], "bucket")
        assert a.partition_for(key) == table[bucket]


def test_lookup_never_raises_for_bytes_and_rejects_other_types_clearly() -> None:
    a = Assignment.from_json(document("t", 7, 3, list(range(7)) * 3, [(b"hot", 6)]))
    rng = random.Random(1)
    keys = [rng.randbytes(rng.randrange(0, 100)) for _ in range(5000)]
    keys += [b"", b"\x00" * 64 * 1024, b"\xff" * 70_000]
    parts = [a.partition_for(k) for k in keys]
    assert all(0 <= p < 7 for p in parts)
    assert a.partition_many(keys) == parts
    for bad in ("hot", None, 5, bytearray(b"hot"), memoryview(b"hot")):
        with pytest.raises(TypeError):
            a.partition_for(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"keys\[1\] must be bytes, not str"):
        a.partition_many([b"ok", "no"])  # type: ignore[list-item]


def test_decoding_errors_carry_the_reason_label() -> None:
    good = json.loads(document("t", 3, 1, [0, 1, 2]))
    cases: list[tuple[bytes, str]] = [
        (b"{not json", "malformed_json"),
        (json.dumps({**good, "format": "other"}).encode(), "malformed_json"),
        (json.dumps({**good, "extra": 1}).encode(), "malformed_json"),
        (json.dumps({**good, "version": 3}).encode(), "unsupported_version"),
        (json.dumps({**good, "table": [0, 1, 3]}).encode(), "out_of_range"),
        (json.dumps({**good, "buckets": 4}).encode(), "invalid"),
        (json.dumps({**good, "topic": "a b"}).encode(), "invalid"),
        (json.dumps(good).encode() + b" " * (8 * 1024 * 1024), "oversize"),
    ]
    for data, reason in cases:
        with pytest.raises(AssignmentError) as info:
            Assignment.from_json(data)
        assert info.value.reason == reason, info.value
        assert isinstance(info.value, ValueError)
    assert set(_native.REJECT_REASONS) >= {r for _, r in cases}


def test_placement_falls_back_to_kafka_placement_while_counts_differ() -> None:
    a = Assignment.from_json(document("t", 4, 1, [3, 3, 3, 3], [(b"hot", 2)]))
    counters = RouteCounters()
    matching = Placement(4, a, counters)
    assert matching.in_effect and matching.assignment == a
    assert matching.route(b"hot") == (2, "heavy")
    assert matching.route(b"cold") == (3, "bucket")
    grown = Placement(6, a, counters)
    assert not grown.in_effect and grown.assignment == a
    none = Placement(6, None, counters)
    for key in (b"hot", b"cold", b""):
        expect = (dkg_kafka.kafka_partition(key, 6), "fallback")
        assert grown.route(key) == expect
        assert none.route(key) == expect
    with pytest.raises(ValueError):
        Placement(0, None, counters)


def test_counters_count_every_placed_record_by_route_and_partition() -> None:
    a = Assignment.from_json(document("t", 2, 1, [1], [(b"hot", 0)]))
    counters = RouteCounters()
    p = Placement(2, a, counters)
    for _ in range(3):
        assert p.place(b"hot") == 0
    assert p.place(b"cold") == 1
    fallback = Placement(3, None, counters)
    fb = fallback.place(b"cold")
    counters.count_unplaced()
    assert dict(counters.routes()) == {"heavy": 3, "bucket": 1, "split": 0, "fallback": 2}
    per = counters.per_partition()
    assert len(per) == 3
    expected = [3, 1, 0]
    expected[fb] += 1
    assert per == expected
    assert counters.unplaced == 1


def test_book_applies_the_control_topic_rules() -> None:
    book = AssignmentBook()
    d5 = document("t", 3, 5, [0, 1, 2], created_at_ms=1)
    assert book.apply(b"t", d5).outcome == "accepted"
    got = book.get("t")
    assert got is not None and got.epoch == 5
    assert book.apply(b"t", d5).outcome == "unchanged"
    cases = [
        (None, d5, "bad_key"),
        (b"\xff", d5, "bad_key"),
        (b"u", d5, "topic_mismatch"),
        (b"t", document("t", 3, 4, [0, 1, 2]), "stale_epoch"),
        (b"t", document("t", 3, 5, [2, 1, 0], created_at_ms=1), "epoch_conflict"),
        (b"t", b"[]", "malformed_json"),
    ]
    for key, value, reason in cases:
        update = book.apply(key, value)
        assert (update.outcome, update.reason) == ("rejected", reason), update.detail
        assert update.detail
        still = book.get("t")
        assert still is not None and still.epoch == 5
    retract = book.apply(b"t", None)
    assert (retract.outcome, retract.topic) == ("retracted", "t")
    assert book.get("t") is None and len(book) == 0
    assert book.apply(b"t", None).outcome == "unchanged"
    # After a retraction any epoch is accepted again.
    assert book.apply(b"t", document("t", 3, 1, [0])).outcome == "accepted"
    assert book.topics() == ["t"]
    small = AssignmentBook(max_value_bytes=10)
    assert small.max_value_bytes == 10
    assert small.apply(b"t", d5).reason == "oversize"


def splitmix_keys_py(seed: int, count: int) -> list[bytes]:
    """The spec's key generator (spec/vectors/README.md), in Python."""
    mask = (1 << 64) - 1
    state = seed & mask

    def nxt() -> int:
        nonlocal state
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return z ^ (z >> 31)

    keys = []
    for _ in range(count):
        n = nxt() % 65
        words = b"".join(nxt().to_bytes(8, "little") for _ in range((n + 7) // 8))
        keys.append(words[:n])
    return keys


def fnv1a64_py(partitions: list[int]) -> str:
    h = 0xCBF29CE484222325
    for p in partitions:
        for byte in p.to_bytes(4, "little"):
            h = ((h ^ byte) * 0x100000001B3) & ((1 << 64) - 1)
    return f"{h:016x}"


def test_batch_helpers_match_their_python_definitions() -> None:
    for seed in (0, 1, 2**63 + 5, 2**64 - 1):
        assert _native.spec_random_keys(seed, 3000) == splitmix_keys_py(seed, 3000)
    rng = random.Random(3)
    parts = [rng.randrange(0, 2**31) for _ in range(3000)]
    assert _native.fnv1a64_partitions(parts) == fnv1a64_py(parts)
    assert _native.fnv1a64_partitions([]) == "cbf29ce484222325"


def test_epoch_header_marks_keys_the_latest_transition_moved() -> None:
    """``dkg-epoch`` (spec section 8): ``moved`` stamps records of keys whose partition changed
    from the predecessor (previous assignment, or Kafka's placement when there was none),
    ``all`` every record the assignment placed, ``off`` none; fallback records never."""
    old = Assignment.from_json(document("t", 4, 6, [0, 1, 2, 3], [(b"hot", 0)]))
    new = Assignment.from_json(document("t", 4, 7, [1, 1, 2, 2], [(b"hot", 3)]))
    keys = [f"k{i}".encode() for i in range(300)] + [b"hot"]

    def stamps(placement: Placement) -> list[bytes | None]:
        out = []
        for k in keys:
            partition, header = placement.place_stamped(k)
            assert partition == new.partition_for(k) or not placement.in_effect
            out.append(header)
        return out

    def moved_from(before: list[int]) -> list[bytes | None]:
        return [b"7" if new.partition_for(k) != p else None for k, p in zip(keys, before)]

    counters = RouteCounters()
    after_old = Placement(4, new, counters, previous=old, previous_known=True)
    expect = moved_from([old.partition_for(k) for k in keys])
    assert stamps(after_old) == expect
    assert b"7" in expect and None in expect
    after_hash = Placement(4, new, counters, previous_known=True)
    assert stamps(after_hash) == moved_from([kafka_partition_of(k, 4) for k in keys])
    # The previous assignment no longer matches the count: keys lived at Kafka's placement.
    old_other_count = Assignment.from_json(document("t", 3, 6, [0, 1, 2], []))
    mixed = Placement(4, new, counters, previous=old_other_count, previous_known=True)
    assert stamps(mixed) == moved_from([kafka_partition_of(k, 4) for k in keys])
    first_at_start = Placement(4, new, counters)
    assert stamps(first_at_start) == [None] * len(keys)
    assert stamps(Placement(4, new, counters, epoch_header="all")) == [b"7"] * len(keys)
    assert stamps(Placement(4, new, counters, previous=old, epoch_header="off")) == [None] * len(
        keys
    )
    # Fallback (the counts differ, or no assignment): never stamped.
    for fallback in (
        Placement(5, new, counters, previous=old, epoch_header="all"),
        Placement(4, None, counters, previous=old, previous_known=True, epoch_header="all"),
    ):
        assert all(fallback.place_stamped(k)[1] is None for k in keys)
    with pytest.raises(ValueError, match="epoch_header"):
        Placement(4, new, counters, epoch_header="some")


def kafka_partition_of(key: bytes, partitions: int) -> int:
    return (murmur2_py(key) & 0x7FFFFFFF) % partitions
