"""Benchmarks of ``DkgConsumer``, printing ratios measured in the same run.

    python bench/consumer_bench.py [--bootstrap HOST:PORT] [--records 200000] [--rounds 5] [--loops 1,1000]
        [--headers]

1. Throughput: the same topic (keyed records, an assignment in effect, no switch in progress: what
   a consumer sees almost all the time) read to its end by a plain ``confluent_kafka.Consumer`` and
   by ``DkgConsumer``, each in a fresh group, in interleaved rounds (plain, dkg, then dkg, plain...),
   both as a ``poll()`` loop (one record per call) and as a ``consume(1000)`` loop. A round's time
   runs from its first record to its last (joining the group is not counted). Printed: the median
   of the per-round ratios dkg/plain (records per second) with min and max, target >= 0.8; then
   the same per second of the consuming thread's CPU time (steadier on a shared machine: the
   wrapper's work is on that thread).
2. The binding crossing, over real ``Message`` objects, in ns of the consuming thread's CPU per
   record, each pass with a fresh core: ``ConsumerCore.offer(msg)`` then ``take()``, ``next()``
   over fetched records (what ``DkgConsumer.poll`` makes per record: one native call, the
   client's queue drained ahead in batches), ``released()`` over batches of 1000 (what
   ``DkgConsumer.consume`` makes per batch) and ``push()`` + ``batch()`` (the per-record path it
   replaces), with the five accessors the binding reads called from Python for scale.
   ``--loops ""`` runs only this part.

Needs a broker (``DKG_TEST_BOOTSTRAP``, default 127.0.0.1:9092). Numbers belong in BENCHMARKS.md
only from a quiet machine.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from dkg_kafka import DkgConsumer, _native

PARTITIONS = 12


def document(topic: str, epoch: int) -> bytes:
    buckets = PARTITIONS * 16
    return json.dumps(
        {
            "format": "dkg.assignment",
            "version": 1,
            "topic": topic,
            "partitions": PARTITIONS,
            "epoch": epoch,
            "bucket_hash": {"function": "murmur2", "seed": 0x2545F491},
            "buckets": buckets,
            "table": [(b + epoch) % PARTITIONS for b in range(buckets)],
            "heavy": [{"key_b64": base64.b64encode(b"k1").decode(), "partition": 3, "weight": 1000}],
            "params": {"theta": 0.01, "epsilon": 0.005, "mu": 16.0, "window_records": 100000},
            "created_at_ms": int(time.time() * 1000),
            "predicted_load": [1.0 / PARTITIONS] * PARTITIONS,
        },
        separators=(",", ":"),
    ).encode()


def fill(bootstrap: str, topic: str, records: int, headers: bool = False) -> None:
    """``headers``: each record stamped ``dkg-epoch: 1``, as the ordering producers stamp theirs."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    value = b"x" * 100
    stamp: list[tuple[str, str | bytes | None]] | None = [("dkg-epoch", b"1")] if headers else None
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=value, key=b"k%d" % (i % 10_000), headers=stamp)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0


def conf(bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "partition.assignment.strategy": "cooperative-sticky",
    }


def read_all(client: Any, records: int, batch: int) -> tuple[float, float]:
    """Records per second from the first record to the ``records``-th: of wall-clock time, and of
    the consuming thread's CPU time (what the wrapper adds runs on that thread; the clients'
    own threads and the other helpers of a shared machine do not count)."""
    n = 0
    first = cpu = 0.0
    while n < records:
        if batch == 1:
            msg = client.poll(1.0)
            got = 0 if msg is None or msg.error() is not None else 1
        else:
            got = sum(1 for m in client.consume(batch, 1.0) if m.error() is None)
        if got and not n:
            first, cpu = time.perf_counter(), time.thread_time()
        n += got
    return records / (time.perf_counter() - first), records / (time.thread_time() - cpu)


def plain_round(bootstrap: str, topic: str, records: int, batch: int) -> tuple[float, float]:
    c = Consumer(conf(bootstrap))
    c.subscribe([topic])
    try:
        return read_all(c, records, batch)
    finally:
        c.close()


def dkg_round(
    bootstrap: str, topic: str, control: str, records: int, batch: int
) -> tuple[float, float]:
    c = DkgConsumer(conf(bootstrap), control_topic=control, commit_interval=5.0)
    c.subscribe([topic])
    try:
        return read_all(c, records, batch)
    finally:
        c.close()


def spread(ratios: list[float]) -> str:
    return (
        f"median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}, "
        f"{len(ratios)} rounds)"
    )


def crossing(bootstrap: str, topic: str, records: int) -> dict[str, float]:
    """ns of the consuming thread's CPU per record, over real messages, each pass with a fresh
    core (a core that has seen an offset treats it, fetched again, as a seek: not the quiet
    path): ``offer()`` + ``take()``; ``next()`` over fetched records (``DkgConsumer.poll``'s one
    native call per record); ``released()`` over batches of 1000 (``DkgConsumer.consume``'s one
    native call per batch); a Python loop calling the five accessors the binding reads
    (``error``, ``partition``, ``offset``, ``key``, ``headers``), and an empty loop, to subtract."""
    c = Consumer(conf(bootstrap))
    c.assign([TopicPartition(topic, p, -2) for p in range(PARTITIONS)])
    msgs: list[Message] = []
    while len(msgs) < records:
        msgs.extend(m for m in c.consume(10_000, 1.0) if m.error() is None)
    c.close()
    assignment = _native.Assignment.from_json(document(topic, 1))

    def fresh() -> _native.ConsumerCore:
        core = _native.ConsumerCore(topic, "bench", PARTITIONS)
        core.on_assignment(assignment)
        for p in range(PARTITIONS):
            core.assign(p, None, None)
        core.defer_housekeeping(3600)
        return core

    def timed(body: Callable[[_native.ConsumerCore], None]) -> float:
        # The thread's CPU time: a shared machine's other work does not count.
        best = float("inf")
        for _ in range(5):
            core = fresh()
            t = time.thread_time_ns()
            body(core)
            best = min(best, (time.thread_time_ns() - t) / len(msgs))
        return best

    def with_core(core: _native.ConsumerCore) -> None:
        offer, take = core.offer, core.take
        for m in msgs:
            offer(m)
            take()

    def empty(core: _native.ConsumerCore) -> None:
        for m in msgs:
            pass

    def accessors(core: _native.ConsumerCore) -> None:
        for m in msgs:
            m.error()
            m.partition()
            m.offset()
            m.key()
            m.headers()

    class Drained:
        """A client with nothing more to fetch (every record is pushed ahead)."""

        def poll(self, timeout: float) -> None:
            return None

        def consume(self, n: int, timeout: float) -> list[Message]:
            return []

    client = Drained()

    def with_next(core: _native.ConsumerCore) -> None:
        step: Any = core.next
        core.push(msgs)
        if not hasattr(core, "step_elapsed"):  # a build whose next() took the client's methods
            poll, consume = client.poll, client.consume
            for _ in msgs:
                step(poll, consume, 0.0, True)
            return
        for _ in msgs:
            step(client, 0.0, True)

    batches = [msgs[i : i + 1000] for i in range(0, len(msgs), 1000)]

    def with_released(core: _native.ConsumerCore) -> None:
        released = core.released
        for b in batches:
            released(b, 1000, True)

    def with_batch(core: _native.ConsumerCore) -> None:
        push, batch = core.push, core.batch
        for b in batches:
            push(b)
            batch([], 1000, True)

    out = {"empty": timed(empty)}
    out["push+batch"] = timed(with_batch)
    out["offer+take"] = timed(with_core) - out["empty"]
    out["next"] = timed(with_next) - out["empty"]
    out["accessors"] = timed(accessors) - out["empty"]
    # A build before ConsumerCore.released has no per-batch call.
    out["released"] = timed(with_released) if hasattr(fresh(), "released") else float("nan")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="DkgConsumer benchmarks")
    parser.add_argument("--bootstrap", default=os.environ.get("DKG_TEST_BOOTSTRAP", "127.0.0.1:9092"))
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--loops", default="1,1000", help="batch sizes: 1 = poll(), n = consume(n)")
    parser.add_argument(
        "--headers", action="store_true", help="records stamped dkg-epoch: 1, as the ordering producers'"
    )
    args = parser.parse_args()
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    topic, control = f"bench-consume-{uuid.uuid4().hex[:8]}", f"bench-control-{uuid.uuid4().hex[:8]}"
    admin.create_topics(
        [
            NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1),
            NewTopic(control, num_partitions=1, replication_factor=1, config={"cleanup.policy": "compact"}),
        ]
    )[topic].result(timeout=30)
    time.sleep(1)
    publisher = Producer({"bootstrap.servers": args.bootstrap})
    publisher.produce(control, key=topic.encode(), value=document(topic, 1))
    assert publisher.flush(30) == 0
    fill(args.bootstrap, topic, args.records, args.headers)
    try:
        for batch in (int(b) for b in args.loops.split(",") if b):
            ratios, cpu_ratios, plain_rates, dkg_rates = [], [], [], []
            plain_ns, dkg_ns = [], []
            for r in range(args.rounds):
                order = ("plain", "dkg") if r % 2 == 0 else ("dkg", "plain")
                rates = {}
                for which in order:
                    if which == "plain":
                        rates[which] = plain_round(args.bootstrap, topic, args.records, batch)
                    else:
                        rates[which] = dkg_round(args.bootstrap, topic, control, args.records, batch)
                plain_rates.append(rates["plain"][0])
                dkg_rates.append(rates["dkg"][0])
                ratios.append(rates["dkg"][0] / rates["plain"][0])
                cpu_ratios.append(rates["dkg"][1] / rates["plain"][1])
                plain_ns.append(1e9 / rates["plain"][1])
                dkg_ns.append(1e9 / rates["dkg"][1])
            how = "poll()" if batch == 1 else f"consume({batch})"
            print(
                f"throughput, {how} loop: plain {statistics.median(plain_rates):,.0f} records/s, "
                f"DkgConsumer {statistics.median(dkg_rates):,.0f} records/s; "
                f"ratio dkg/plain {spread(ratios)} (target >= 0.8); per second of the consuming "
                f"thread's CPU: {spread(cpu_ratios)}; consuming-thread CPU per record: plain "
                f"{statistics.median(plain_ns):.0f} ns, DkgConsumer {statistics.median(dkg_ns):.0f} ns "
                f"(medians)"
            )
        x = crossing(args.bootstrap, topic, min(args.records, 100_000))
        print(
            f"binding crossing (consuming-thread CPU per record, a fresh core per pass, best of 5): "
            f"offer()+take() {x['offer+take']:.0f} ns, next() {x['next']:.0f} ns, released() over "
            f"batches of 1000 {x['released']:.0f} ns (push()+batch(), the per-record path it "
            f"replaces, {x['push+batch']:.0f} ns); for scale, the five accessors called from "
            f"Python {x['accessors']:.0f} ns (an empty loop, subtracted from all but released(), "
            f"{x['empty']:.0f} ns)"
        )
    finally:
        admin.delete_topics([topic, control])


if __name__ == "__main__":
    main()
