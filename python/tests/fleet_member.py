"""One consumer-group member for the mixed-fleet broker test (``partitioner/tests/consumer_mixed_fleet.rs``,
run with ``python/.venv/bin/python``): a ``dkg_kafka.DkgConsumer`` (or, for the control run, a plain
``confluent_kafka.Consumer``) that reports every record it processes on stdout. The Rust test checks
per-key order, loss and duplicates over the group. Not collected by pytest (not ``test_*``).

Usage::

    fleet_member.py BOOTSTRAP TOPIC CONTROL HANDOFF GROUP NAME MODE EVERY PAUSE_MS [PROTOCOL]

``MODE``: ``dkg`` or ``plain``; the member pauses ``PAUSE_MS`` after every ``EVERY`` records (uneven
speeds, so partitions lag behind each other). ``PROTOCOL``: the group protocol, ``classic`` (the
default: cooperative-sticky, a 6 s session) or ``consumer`` (KIP-848: the broker assigns, and the
member sets nothing else of the group's). It prints ``ready`` once constructed, subscribes on a
``go`` line on stdin, and closes (final commit, leaves the group) on ``stop``, then prints
``closed``. End of stdin before ``stop``: exit 1. Every stdout line starts with the wall clock in ns
(``time.time_ns()``):

- ``<ns> r NAME PARTITION OFFSET KEY VALUE``: a record handed to the application (processed);
- ``<ns> c NAME``: a synchronous commit returned: every record printed before is committed (the
  member commits every ``COMMIT_EVERY`` records; ``DkgConsumer`` may commit more on its own, which
  only covers more);
- ``<ns> a NAME N`` / ``<ns> v NAME N``: N partitions assigned / revoked or lost;
- ``<ns> e NAME ERROR``: the member failed.

Each record is printed and flushed before the next poll (where ``DkgConsumer`` counts it processed and
may commit it), so whatever a commit covers was printed: a member killed with SIGKILL loses no line
of a committed record.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from dkg_kafka import DkgConsumer

COMMIT_EVERY = 200
# Commit failures around a rebalance: the records stay uncommitted, their next owner commits them.
RETRY_LATER = (
    KafkaError.REBALANCE_IN_PROGRESS,
    KafkaError.ILLEGAL_GENERATION,
    KafkaError.UNKNOWN_MEMBER_ID,
    KafkaError._NO_OFFSET,
)


def line(text: str) -> None:
    sys.stdout.write(f"{time.time_ns()} {text}\n")
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    if len(argv) not in (9, 10):
        print(__doc__, file=sys.stderr)
        return 2
    bootstrap, topic, control, handoff, group, name, mode, every_s, pause_s = argv[:9]
    protocol = argv[9] if len(argv) == 10 else "classic"
    if protocol not in ("classic", "consumer"):
        print(f"PROTOCOL must be classic or consumer, got {protocol}", file=sys.stderr)
        return 2
    every, pause = int(every_s), int(pause_s) / 1000
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": name,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
    }
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})

    def assigned(n: int) -> None:
        if n:
            line(f"a {name} {n}")

    def revoked(n: int) -> None:
        if n:
            line(f"v {name} {n}")

    client: Any
    if mode == "dkg":
        client = DkgConsumer(
            conf,
            control_topic=control,
            handoff_topic=handoff,
            member=name,
            commit_interval=None,
            # Keeps the commit metadata's list of unprocessed offsets within the broker's 4096 B
            # (C7, C13): a list that does not fit would make the next owner re-process more.
            max_held_records=150,
            on_assign=lambda ps: assigned(len(ps)),
            on_revoke=lambda ps: revoked(len(ps)),
        )
    elif mode == "plain":
        conf["enable.auto.commit"] = False
        if protocol == "classic":
            conf["partition.assignment.strategy"] = "cooperative-sticky"
        client = Consumer(conf)
    else:
        print(f"MODE must be dkg or plain, got {mode}", file=sys.stderr)
        return 2

    commands: list[str] = []
    arrived = threading.Condition()

    def read_stdin() -> None:
        for command in sys.stdin:
            with arrived:
                commands.append(command.strip())
                arrived.notify_all()
        with arrived:
            commands.append("eof")
            arrived.notify_all()

    threading.Thread(target=read_stdin, daemon=True).start()
    line("ready")
    with arrived:
        arrived.wait_for(lambda: bool(commands))
        first = commands.pop(0)
    if first != "go":
        print(f"expected go, read {first!r}", file=sys.stderr)
        return 1
    try:
        if mode == "dkg":
            client.subscribe([topic])
        else:

            def on_assign(_: Consumer, tps: list[TopicPartition]) -> None:
                assigned(len(tps))

            def on_revoke(_: Consumer, tps: list[TopicPartition]) -> None:
                revoked(len(tps))

            client.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        n = 0
        since_commit = 0
        while True:
            with arrived:
                command = commands[0] if commands else None
            if command is not None:
                break
            msg = client.poll(0.1)
            if msg is None or msg.error() is not None:
                continue
            key = (msg.key() or b"").decode()
            value = (msg.value() or b"").decode()
            line(f"r {name} {msg.partition()} {msg.offset()} {key} {value}")
            n += 1
            since_commit += 1
            if since_commit >= COMMIT_EVERY:
                try:
                    client.commit(asynchronous=False)
                except KafkaException as e:
                    # A commit during a rebalance (or of nothing, once the records' partitions were
                    # revoked): poll on (no "c": the test then allows these records once more
                    # should this member crash).
                    if e.args[0].code() not in RETRY_LATER:
                        raise
                else:
                    line(f"c {name}")
                    since_commit = 0
            if pause and n % every == 0:
                time.sleep(pause)
        if command != "stop":
            print(f"expected stop, read {command!r}", file=sys.stderr)
            return 1
        try:
            client.close()
        except KafkaException as e:
            # Members of the test's groups stop one after another: a group rebalancing as others
            # leave can fail this member's final commits (its records since its last commit would
            # go to a next owner; there is none at the end of the run). Anything else fails.
            if "final commit on close" not in str(e) or not any(
                code in str(e) for code in ("ILLEGAL_GENERATION", "REBALANCE_IN_PROGRESS", "UNKNOWN_MEMBER_ID")
            ):
                raise
            print(f"{name}: {e} (members leaving together)", file=sys.stderr)
        line("closed")
        return 0
    except Exception as e:  # reported to the test, which fails at once
        line(f"e {name} {e!r}".replace("\n", " "))
        raise


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
