"""``DkgProducer.produce`` (the extension's ``ProducerCore``) without a broker: what reaches the
client's ``produce``, which records are placed and counted, and which errors come back."""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from dkg_kafka import Assignment, DkgProducer, Placement, RouteCounters
from dkg_kafka._native import PlacementTable, ProducerCore

from .conftest import rotated

# Epoch 2 moves some keys, not all (another bucket count).
DOCS = [rotated("t", 4, epoch=1, shift=0), rotated("t", 4, epoch=2, shift=1, buckets=3)]


def table(**placements: Placement) -> PlacementTable:
    t = PlacementTable()
    for topic, p in placements.items():
        t[topic] = p
    return t


class Client:
    """Records every call of the client's ``produce``; raises ``error`` if set."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        self.error: BaseException | None = None

    def produce(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append((args, kwargs))
        if self.error is not None:
            raise self.error


def bound(epoch_header: str = "off") -> tuple[ProducerCore, Client, RouteCounters, list[str]]:
    """A core over a fake client: topic ``t`` (4 partitions) placed by epoch 2, moved from 1."""
    a = [Assignment.from_json(d) for d in DOCS]
    counters = RouteCounters()
    placements = table(t=Placement(4, a[1], counters, previous=a[0], epoch_header=epoch_header))
    unplaced: list[str] = []
    client = Client()
    core = ProducerCore()
    core.bind(client.produce, placements, unplaced.append)
    return core, client, counters, unplaced


def test_a_keyed_record_reaches_the_client_once_with_its_partition_as_one_positional_tuple() -> None:
    core, client, counters, unplaced = bound()
    a2 = Assignment.from_json(DOCS[1])
    keys = [f"key-{i}".encode() for i in range(50)] + [b"hot"]
    for k in keys:
        core.produce("t", b"v", k)
    assert client.calls == [(("t", b"v", k, a2.partition_for(k)), {}) for k in keys]
    routes = dict(counters.routes())
    assert routes == {"heavy": 1, "bucket": len(keys) - 1, "split": 0, "fallback": 0}
    assert sum(counters.per_partition()) == len(keys)
    assert unplaced == []


def test_str_keys_are_encoded_and_placed_like_their_bytes() -> None:
    core, client, _, _ = bound()
    core.produce("t", "value", key="hot")
    core.produce("t", None, "kéy")
    a2 = Assignment.from_json(DOCS[1])
    assert client.calls == [
        (("t", "value", b"hot", a2.partition_for(b"hot")), {}),
        (("t", None, "kéy".encode(), a2.partition_for("kéy".encode())), {}),
    ]
    with pytest.raises(UnicodeEncodeError):
        core.produce("t", b"v", "\ud800")  # what the client raises for it too


def test_keyless_explicit_partition_and_buffer_keys_pass_through_uncounted() -> None:
    core, client, counters, unplaced = bound()
    core.produce("t", b"keyless")
    core.produce("t", b"explicit", b"hot", 3)
    core.produce("t", b"explicit-str", "hot", partition=0)
    core.produce("t", b"buffer", bytearray(b"hot"))  # type: ignore[arg-type]
    assert client.calls == [
        (("t", b"keyless", None, -1), {}),
        (("t", b"explicit", b"hot", 3), {}),
        (("t", b"explicit-str", "hot", 0), {}),
        (("t", b"buffer", bytearray(b"hot"), -1), {}),
    ]
    assert sum(n for _, n in counters.routes()) == 0
    assert unplaced == []


def test_a_topic_without_a_partition_count_is_left_to_the_client_and_reported() -> None:
    core, client, _, unplaced = bound()
    core.produce("new-topic", b"v", b"k")
    core.produce("new-topic", b"v")  # keyless: not reported
    assert client.calls == [
        (("new-topic", b"v", b"k", -1), {}),
        (("new-topic", b"v", None, -1), {}),
    ]
    assert unplaced == ["new-topic"]


def test_callbacks_timestamp_and_headers_fill_the_clients_slots() -> None:
    """The client's positional order is (topic, value, key, partition, callback, on_delivery,
    timestamp, headers) and it prefers ``callback``; a None ``callback`` would hide
    ``on_delivery``, so the one that applies goes in the ``callback`` slot."""
    core, client, _, _ = bound()

    def cb(err: Any, msg: Any) -> None: ...

    def od(err: Any, msg: Any) -> None: ...

    p = Assignment.from_json(DOCS[1]).partition_for(b"k")
    core.produce("t", b"v", b"k", on_delivery=od)
    core.produce("t", b"v", b"k", -1, od, 1234)
    core.produce("t", b"v", b"k", callback=cb)
    core.produce("t", b"v", b"k", on_delivery=od, callback=cb)
    core.produce("t", b"v", b"k", headers=[("app", b"x")])
    core.produce("t", b"v", None, timestamp=99)
    assert [args for args, _ in client.calls] == [
        ("t", b"v", b"k", p, od, None, 0, None),
        ("t", b"v", b"k", p, od, None, 1234, None),
        ("t", b"v", b"k", p, cb, None, 0, None),
        ("t", b"v", b"k", p, cb, None, 0, None),
        ("t", b"v", b"k", p, None, None, 0, [("app", b"x")]),
        ("t", b"v", None, -1, None, None, 99, None),
    ]
    assert all(kwargs == {} for _, kwargs in client.calls)


def test_the_epoch_header_goes_after_the_records_own_headers() -> None:
    core, client, _, _ = bound(epoch_header="all")
    p = Assignment.from_json(DOCS[1]).partition_for(b"k")
    core.produce("t", b"v", b"k")
    core.produce("t", b"v", b"k", headers=[("app", b"x")])
    core.produce("t", b"v", b"k", headers={"app": b"x", "n": "2"})
    core.produce("t", b"v", b"k", headers=(("app", b"x"),))
    core.produce("t", b"v", b"k", 1, headers=[("app", b"x")])  # explicit partition: untouched
    epoch = ("dkg-epoch", b"2")
    assert [args for args, _ in client.calls] == [
        ("t", b"v", b"k", p, None, None, 0, [epoch]),
        ("t", b"v", b"k", p, None, None, 0, [("app", b"x"), epoch]),
        ("t", b"v", b"k", p, None, None, 0, [("app", b"x"), ("n", "2"), epoch]),
        ("t", b"v", b"k", p, None, None, 0, [("app", b"x"), epoch]),
        ("t", b"v", b"k", 1, None, None, 0, [("app", b"x")]),
    ]
    with pytest.raises(TypeError):
        core.produce("t", b"v", b"k", headers=7)


def test_moved_keys_only_carry_the_header_under_the_default_rule() -> None:
    core, client, _, _ = bound(epoch_header="moved")
    a = [Assignment.from_json(d) for d in DOCS]
    keys = [f"key-{i}".encode() for i in range(200)]
    for k in keys:
        core.produce("t", b"v", k)
    moved = {k for k in keys if a[1].partition_for(k) != a[0].partition_for(k)}
    assert moved and len(moved) < len(keys)
    for (args, _), k in zip(client.calls, keys):
        if k in moved:
            assert args[-1] == [("dkg-epoch", b"2")], k
        else:
            assert len(args) == 4, k


def test_the_clients_exceptions_come_back_unchanged() -> None:
    core, client, counters, _ = bound()
    for error in (BufferError("Local: Queue full"), KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT))):
        client.error = error
        with pytest.raises(type(error)) as raised:
            core.produce("t", b"v", b"k")
        assert raised.value is error


def test_bad_arguments_raise_type_errors_and_reach_nothing() -> None:
    core, client, _, _ = bound()
    bad: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((), {}),
        (("t",), {"colour": "red"}),
        (("t", b"v", b"k", "2"), {}),
        (("t", b"v", b"k", None), {}),
        (("t", b"v", b"k"), {"timestamp": "now"}),
        (("t", b"v", b"k", -1, None, 0, None, None), {}),
        (("t", b"v"), {"value": b"w"}),
    ]
    for args, kwargs in bad:
        with pytest.raises(TypeError):
            core.produce(*args, **kwargs)
    with pytest.raises(OverflowError):
        core.produce("t", b"v", b"k", 2**40)
    assert client.calls == []


def test_bind_is_once_and_required() -> None:
    core = ProducerCore()
    with pytest.raises(RuntimeError, match="bind"):
        core.produce("t", b"v")
    core.bind(Client().produce, table(), print)
    with pytest.raises(RuntimeError, match="already bound"):
        core.bind(Client().produce, table(), print)


def test_the_real_clients_parser_takes_every_shape() -> None:
    """Against confluent-kafka's own ``Producer.produce`` (no broker: records stay queued): each
    call shape is accepted, the delivery callback reaches the client, its errors come back."""
    producer = Producer({"bootstrap.servers": "127.0.0.1:1", "message.timeout.ms": 60_000})
    a = Assignment.from_json(DOCS[1])
    counters = RouteCounters()
    unplaced: list[str] = []
    core = ProducerCore()
    core.bind(producer.produce, table(t=Placement(4, a, counters, epoch_header="all")), unplaced.append)
    reports: list[Any] = []

    def report(err: Any, msg: Any) -> None:
        reports.append((err.code(), msg.key()))

    core.produce("t", b"v", b"k1")
    core.produce("t", b"v", "k2", on_delivery=report)
    core.produce("t", b"v", b"k3", callback=report, timestamp=1_700_000_000_000)
    core.produce("t", b"v", b"k4", headers={"app": b"x"})
    core.produce("t", b"v", b"k5", 2)
    core.produce("u", b"v", b"k6", on_delivery=report)
    core.produce("t", b"keyless")
    assert unplaced == ["u"]
    with pytest.raises(TypeError):
        core.produce(b"t", b"v", b"k")  # type: ignore[arg-type]  # the client's own check
    producer.purge()
    producer.poll(0)
    purged = KafkaError._PURGE_QUEUE
    assert sorted(reports) == [(purged, b"k2"), (purged, b"k3"), (purged, b"k6")]


def test_dkg_producer_forwards_every_other_client_method_without_getattr() -> None:
    public = [n for n in dir(Producer) if not n.startswith("_")]
    assert public and all(callable(getattr(DkgProducer, n)) for n in public)
    assert "__getattr__" not in vars(DkgProducer)
    assert DkgProducer.produce is ProducerCore.produce
    assert DkgProducer.list_topics.__doc__ == Producer.list_topics.__doc__


def test_produce_many_places_like_produce_and_stops_at_a_full_queue() -> None:
    core, client, counters, unplaced = bound(epoch_header="moved")
    single, single_client, _, _ = bound(epoch_header="moved")
    keys: list[bytes | str | None] = [f"key-{i}".encode() for i in range(100)] + ["hot", None]
    assert core.produce_many("t", [(b"v", k) for k in keys]) == len(keys)
    for k in keys:
        single.produce("t", b"v", k)
    assert client.calls == single_client.calls
    assert sum(counters.per_partition()) == len(keys) - 1  # the keyless one is not counted

    def od(err: Any, msg: Any) -> None: ...

    client.calls.clear()
    assert core.produce_many("new-topic", iter([(b"v", b"k"), (None, None)]), on_delivery=od) == 2
    assert [args for args, _ in client.calls] == [
        ("new-topic", b"v", b"k", -1, od, None, 0, None),
        ("new-topic", None, None, -1, od, None, 0, None),
    ]
    assert unplaced == ["new-topic"]

    class FullAfter(Client):
        def produce(self, *args: Any, **kwargs: Any) -> None:
            super().produce(*args, **kwargs)
            if len(self.calls) > 3:
                raise BufferError("Local: Queue full")

    full = FullAfter()
    core = ProducerCore()
    core.bind(full.produce, table(), unplaced.append)
    assert core.produce_many("u", [(b"v", b"k")] * 10) == 3
    full.error = KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT))
    with pytest.raises(KafkaException):
        core.produce_many("u", [(b"v", b"k")])
    with pytest.raises(TypeError):
        core.produce_many("u", [b"not a pair"])  # type: ignore[list-item]


def test_every_write_to_the_table_reaches_the_next_record_of_the_same_topic_object() -> None:
    """The lookup's one-entry cache (the last topic's ``str`` object) never answers across a
    swap, a removal or another topic, and a ``str`` subclass or an equal copy finds the same."""
    a = [Assignment.from_json(d) for d in DOCS]
    placements = table()
    client, unplaced = Client(), list[str]()
    core = ProducerCore()
    core.bind(client.produce, placements, unplaced.append)
    topic = "orders"
    keys = [f"key-{i}".encode() for i in range(40)]
    by = [[x.partition_for(k) for k in keys] for x in a]
    assert by[0] != by[1]

    def partitions(t: str = topic) -> list[int]:
        client.calls.clear()
        for k in keys:
            core.produce(t, b"v", k)
        return [args[3] for args, _ in client.calls]

    assert partitions() == [-1] * len(keys) and unplaced == [topic] * len(keys)
    placements[topic] = Placement(4, a[0], RouteCounters(), epoch_header="off")
    assert partitions() == by[0]
    placements[topic] = Placement(4, a[1], RouteCounters(), epoch_header="off")
    assert partitions() == by[1]
    placements["other"] = Placement(4, a[0], RouteCounters(), epoch_header="off")
    assert partitions("other") == by[0]
    assert partitions() == by[1]

    class Topic(str):
        pass

    assert partitions(Topic(topic)) == by[1]
    copy = "".join(["ord", "ers"])
    assert copy == topic and copy is not topic
    assert partitions(copy) == by[1]
    unplaced.clear()
    assert placements.pop(topic) is not None and placements.pop(topic) is None
    assert partitions() == [-1] * len(keys) and unplaced == [topic] * len(keys)
    assert len(placements) == 1 and placements.get(topic) is None
    assert placements.get("other") is not None


def test_the_fast_entry_and_the_general_path_make_the_same_calls() -> None:
    """``produce(topic, value, key)`` of a placed ``str`` topic and a ``bytes`` key takes the
    native entry's short path; the same records as keywords take the general one. Both reach
    the client with the same arguments (headers of moved keys included) and count the same,
    across topic switches (lookup cache misses), an unplaced topic and keyless records."""
    fast, fast_client, fast_counters, fast_unplaced = bound(epoch_header="moved")
    slow, slow_client, slow_counters, slow_unplaced = bound(epoch_header="moved")
    records: list[tuple[str, bytes | None, bytes | None]] = []
    for i in range(300):
        topic = ("t", "t", "new-topic")[i % 3] if i % 7 else "t"
        records.append((topic, b"v%d" % i if i % 11 else None, None if i % 13 == 0 else b"key-%d" % i))
    for topic, value, key in records:
        fast.produce(topic, value, key)
        slow.produce(topic=topic, key=key, value=value)
    assert fast_client.calls == slow_client.calls
    assert any(len(args) == 8 for args, _ in fast_client.calls)  # some moved keys: a header
    assert any(len(args) == 4 and args[3] >= 0 for args, _ in fast_client.calls)
    assert fast_counters.routes() == slow_counters.routes()
    assert fast_counters.per_partition() == slow_counters.per_partition()
    assert fast_unplaced == slow_unplaced and fast_unplaced


def test_calls_the_fast_entry_does_not_take_fail_as_pyo3_reports_them() -> None:
    """Calls the native entry cannot take as they stand go to the PyO3-generated method: its
    exceptions and messages, and nothing reaches the client. ``produce`` keeps the client's
    signature for ``inspect`` (and stubtest)."""
    core, client, _, _ = bound()
    cases: list[tuple[tuple[Any, ...], dict[str, Any], type[BaseException], str]] = [
        ((), {}, TypeError, "missing 1 required positional argument: 'topic'"),
        (("t",), {"colour": "red"}, TypeError, "got an unexpected keyword argument 'colour'"),
        (("t", b"v"), {"value": b"w"}, TypeError, "got multiple values for argument 'value'"),
        (("t", b"v", b"k", "2"), {}, TypeError, "argument 'partition'"),
        (("t", b"v", b"k"), {"timestamp": "now"}, TypeError, "argument 'timestamp'"),
        (("t", b"v", b"k", -1, None, 0, None, None), {}, TypeError, "takes from 1 to 7 positional"),
        (("t", b"v", b"k", 2**40), {}, OverflowError, "out of range integral type conversion"),
    ]
    for args, kwargs, error, message in cases:
        with pytest.raises(error, match=re.escape(message)):
            core.produce(*args, **kwargs)
    assert client.calls == []
    assert list(inspect.signature(ProducerCore.produce).parameters) == [
        "self", "topic", "value", "key", "partition", "on_delivery", "timestamp", "headers", "callback",
    ]
    assert "confluent_kafka.Producer.produce" in (ProducerCore.produce.__doc__ or "")
