"""Benchmarks of the Python package, printing ratios measured in the same run.

    python bench/bench.py [--bootstrap HOST:PORT] [--records 50000] [--rounds 100] [--adoptions 50]

1. Throughput: the same keyed records through a plain ``confluent_kafka.Producer`` and through
   ``DkgProducer`` (an assignment in effect), in interleaved rounds (plain, dkg, plain, dkg...) so
   drift on a shared machine hits both, the order reversed every other round; each round produces
   and flushes every record (the collector frozen meanwhile). Many short rounds: on a busy machine
   a round's ratio swings by tens of percent, and the median of 100 is steadier than that of 15
   long ones. Printed: the median of the per-round ratios dkg/plain (records per second), with
   quartiles, min and max. Target >= 0.9.
   The same ratios per second of CPU time follow: of the whole process (the clients' threads
   included) and of the producing thread alone (its ``produce()`` calls, the wrapper's cost);
   then the batch path, ``DkgProducer.produce_many``, in the same rounds against the same plain
   ``produce()`` loop.
2. Lookup vs produce(): the Python-visible cost of one ``Placement.place`` call (the lookup and its
   counting, what ``DkgProducer`` adds per record) against one plain ``produce()`` call (its Python
   overhead and enqueue, without the flush). Target: lookup <= produce().
3. Adoption latency: time from a control-topic publication (the publisher's ``produce()`` call)
   to the router routing by it, over ``--adoptions`` epochs; p50 and p99. Target p99 <= 1 s.

Needs a broker (``DKG_TEST_BOOTSTRAP``, default 127.0.0.1:9092). Numbers belong in BENCHMARKS.md
only from a quiet machine.
"""

from __future__ import annotations

import argparse
import base64
import gc
import json
import os
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from dkg_kafka import DkgProducer, Router


def create_topic(admin: AdminClient, name: str, partitions: int, config: dict[str, str]) -> None:
    admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config)]
    )[name].result(timeout=30)


def document(topic: str, partitions: int, epoch: int, heavy: list[bytes]) -> bytes:
    buckets = partitions * 16
    return json.dumps(
        {
            "format": "dkg.assignment",
            "version": 1,
            "topic": topic,
            "partitions": partitions,
            "epoch": epoch,
            "bucket_hash": {"function": "murmur2", "seed": 0x2545F491},
            "buckets": buckets,
            "table": [(b + epoch) % partitions for b in range(buckets)],
            "heavy": [
                {"key_b64": base64.b64encode(k).decode(), "partition": i % partitions, "weight": 1000}
                for i, k in enumerate(heavy)
            ],
            "params": {"theta": 0.01, "epsilon": 0.005, "mu": 16.0, "window_records": 100000},
            "created_at_ms": int(time.time() * 1000),
            "predicted_load": [1.0 / partitions] * partitions,
        },
        separators=(",", ":"),
    ).encode()


def publish(producer: Producer, control: str, topic: str, doc: bytes) -> float:
    """Publish and wait for the acknowledgement; returns ``time.monotonic()`` just before the
    ``produce()`` call (the router can see the record before the publisher sees its ack)."""
    acked: list[Any] = []
    sent = time.monotonic()
    producer.produce(control, doc, topic.encode(), on_delivery=lambda err, _msg: acked.append(err))
    producer.flush(30)
    if acked != [None]:
        raise RuntimeError(f"control record not acknowledged: {acked}")
    return sent


def produce_round(produce: Callable[..., None], flush: Callable[[float], int], poll: Callable[[float], int],
                  topic: str, records: list[tuple[bytes, bytes]]) -> tuple[float, float, float]:
    """Records per second of wall-clock time, and per second of CPU time of the process (all
    threads: the client's too) and of the producing thread (its ``produce()`` calls)."""
    start, cpu, thread = time.perf_counter(), time.process_time(), time.thread_time()
    for key, value in records:
        while True:
            try:
                produce(topic, value, key)
                break
            except BufferError:  # the queue stays full until the client has sent some
                poll(0.05)
    thread = time.thread_time() - thread
    if flush(120) != 0:
        raise RuntimeError("records left after flush")
    n = len(records)
    return n / (time.perf_counter() - start), n / (time.process_time() - cpu), n / thread


def produce_many_round(dkg: DkgProducer, topic: str, pairs: list[tuple[bytes, bytes]],
                       chunk: int = 10_000) -> tuple[float, float, float]:
    """``produce_round`` through ``DkgProducer.produce_many`` (``(value, key)`` pairs, chunks)."""
    start, cpu, thread = time.perf_counter(), time.process_time(), time.thread_time()
    for i in range(0, len(pairs), chunk):
        rest = pairs[i:i + chunk]
        while rest:
            rest = rest[dkg.produce_many(topic, rest):]
            if rest:
                dkg.poll(0.05)
    thread = time.thread_time() - thread
    if dkg.flush(120) != 0:
        raise RuntimeError("records left after flush")
    n = len(pairs)
    return n / (time.perf_counter() - start), n / (time.process_time() - cpu), n / thread


def summary(ratios: list[float]) -> str:
    q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
    return (f"median {statistics.median(ratios):.3f} (quartiles {q1:.3f}-{q3:.3f}, min "
            f"{min(ratios):.3f}, max {max(ratios):.3f})")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description="dkg_kafka benchmarks")
    parser.add_argument("--bootstrap", default=os.environ.get("DKG_TEST_BOOTSTRAP", "127.0.0.1:9092"))
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--adoptions", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=12)
    args = parser.parse_args()

    conf: dict[str, Any] = {"bootstrap.servers": args.bootstrap}
    admin = AdminClient(conf)
    run = uuid.uuid4().hex[:8]
    topic, control = f"dkg-bench-{run}", f"dkg-bench-control-{run}"
    create_topic(admin, topic, args.partitions, {})
    create_topic(admin, control, 1, {"cleanup.policy": "compact"})
    heavy = [f"hot-{i}".encode() for i in range(8)]
    publisher = Producer({**conf, "enable.idempotence": True})
    publish(publisher, control, topic, document(topic, args.partitions, 1, heavy))

    records = [
        (heavy[i % 8] if i % 5 == 0 else f"user-{(i * 7919) % 100_000}".encode(), b"x" * 64)
        for i in range(args.records)
    ]
    same = {**conf, "enable.idempotence": True, "acks": "all", "partitioner": "murmur2_random",
            "linger.ms": 5}
    plain = Producer(same)
    dkg = DkgProducer(same, control_topic=control, metadata_refresh_interval=1.0)
    if not dkg.router.wait_for_epoch(topic, 1, 30):
        raise RuntimeError("assignment not adopted")

    # 1. Throughput, interleaved rounds (one warm-up round each first).
    produce_round(plain.produce, plain.flush, plain.poll, topic, records[: args.records // 10])
    produce_round(dkg.produce, dkg.flush, dkg.poll, topic, records[: args.records // 10])
    pairs = [(v, k) for k, v in records]
    contenders: dict[str, Callable[[], tuple[float, float, float]]] = {
        "plain": lambda: produce_round(plain.produce, plain.flush, plain.poll, topic, records),
        "dkg": lambda: produce_round(dkg.produce, dkg.flush, dkg.poll, topic, records),
        "many": lambda: produce_many_round(dkg, topic, pairs),
    }
    # Steadier rounds: the collector frozen (the records list and the clients' objects are never
    # scanned mid-round), and the order reversed every other round so that whatever the previous
    # run leaves behind (the broker still writing its records, a neighbour's burst) falls on each
    # contender as often.
    gc.collect()
    gc.freeze()
    ratios: list[list[float]] = [[], [], []]
    batch: list[list[float]] = [[], [], []]
    thread_ns: dict[str, list[float]] = {name: [] for name in contenders}
    wall_ns: dict[str, list[float]] = {name: [] for name in contenders}
    for i in range(args.rounds):
        order = list(contenders) if i % 2 == 0 else list(reversed(contenders))
        got = {name: contenders[name]() for name in order}
        for name, (per_s, _, per_thread_s) in got.items():
            wall_ns[name].append(1e9 / per_s)
            thread_ns[name].append(1e9 / per_thread_s)
        for r, b, o in zip(ratios, got["plain"], got["dkg"]):
            r.append(o / b)
        for r, b, o in zip(batch, got["plain"], got["many"]):
            r.append(o / b)
    gc.unfreeze()
    print(f"throughput DkgProducer / Producer: {summary(ratios[0])} over {args.rounds} rounds "
          f"of {args.records} records (target >= 0.9)")
    # The same rounds by CPU time (less exposed to other load than wall-clock time).
    print(f"  per CPU second of the process: {summary(ratios[1])}; of the producing thread "
          f"(the produce() calls): {summary(ratios[2])}")
    # Thread CPU close to wall time: the producing thread sets the pace (the wall ratio then
    # follows the thread-CPU ratio); far below it: the sending does.
    print("  per record, median wall time / producing thread's CPU: " + ", ".join(
        f"{name} {statistics.median(wall_ns[name]):.0f} / {statistics.median(ns):.0f} ns"
        for name, ns in thread_ns.items()))
    print(f"throughput DkgProducer.produce_many (batches of 10000) / Producer.produce: "
          f"{summary(batch[0])}; per CPU second of the process: {summary(batch[1])}; of the "
          f"producing thread: {summary(batch[2])}")

    # 2. Lookup vs one produce() call.
    placement = dkg.router.placement(topic)
    if placement is None:
        raise RuntimeError("no placement")
    keys = [k for k, _ in records]
    lookup_ratios, lookup_ns, produce_ns = [], [], []
    for _ in range(args.rounds):
        place = placement.place
        start = time.perf_counter()
        for k in keys:
            place(k)
        lookup = (time.perf_counter() - start) / len(keys)
        produce = plain.produce
        start = time.perf_counter()
        for k, v in records:
            try:
                produce(topic, v, k, 0)
            except BufferError:
                plain.poll(0.05)
        call = (time.perf_counter() - start) / len(records)
        plain.flush(120)
        lookup_ns.append(lookup * 1e9)
        produce_ns.append(call * 1e9)
        lookup_ratios.append(lookup / call)
    print(f"lookup from Python: {statistics.median(lookup_ns):.0f} ns; one produce() call: "
          f"{statistics.median(produce_ns):.0f} ns; lookup / produce(): {summary(lookup_ratios)} "
          "(target <= 1)")

    # 3. Adoption latency.
    latencies = []
    router: Router = dkg.router
    for epoch in range(2, 2 + args.adoptions):
        sent = publish(publisher, control, topic, document(topic, args.partitions, epoch, heavy))
        if not router.wait_for_epoch(topic, epoch, 30):
            raise RuntimeError(f"epoch {epoch} not adopted")
        adopted = router.adopted_at(topic, epoch)
        if adopted is None:
            raise RuntimeError("adoption time missing")
        latencies.append(adopted - sent)
    print(f"adoption latency from the publication: p50 {percentile(latencies, 0.5) * 1000:.0f} ms, "
          f"p99 {percentile(latencies, 0.99) * 1000:.0f} ms over {args.adoptions} epochs (target p99 <= 1000 ms)")

    dkg.close()
    plain.flush(30)
    admin.delete_topics([topic, control])


if __name__ == "__main__":
    main()
