"""The conformance traces of the consumer rules (``spec/traces``, C1-C19) replayed through the
extension's ``ConsumerCore`` and ``DkgConsumer``'s glue (its commit, announcement, hook and
rebalance code), with the Kafka clients replaced by the trace: the steps of
``spec/traces/README.md``, "How to replay". Every trace must give its outputs exactly (records per
key in order, effects in order, commit metadata and announced values as exact strings).

The traces are ``$DKG_TRACES`` if set, else the repository's ``spec/traces``.
"""

from __future__ import annotations

import base64
import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Message, TopicPartition

from dkg_kafka import _native
from dkg_kafka.consumer import DkgConsumer

from .conftest import REPO_ROOT, FakeMsg

TRACES = Path(os.environ.get("DKG_TRACES") or REPO_ROOT / "spec" / "traces")


def trace_files() -> list[Path]:
    return sorted(TRACES.glob("C*.json")) if TRACES.is_dir() else []


def test_every_consumer_rule_has_a_trace() -> None:
    assert TRACES.is_dir(), f"conformance traces missing: {TRACES} (spec/traces, or DKG_TRACES)"
    rules = {json.loads(p.read_text())["rule"] for p in trace_files()}
    assert rules >= {f"C{n:02d}" for n in range(1, 20)}, sorted(rules)


class TraceClient:
    """The data topic's client: commits and flow control become effects; committed offsets are
    the trace's."""

    def __init__(self, effects: list[Any]) -> None:
        self.effects = effects
        self.committed_answer: dict[int, tuple[int, str]] = {}

    def commit(self, *, offsets: list[TopicPartition], asynchronous: bool = True) -> Any:
        self.effects.append(
            {
                "commit": [
                    {"partition": tp.partition, "offset": tp.offset, "metadata": tp.metadata}
                    for tp in offsets
                ]
            }
        )
        return None if asynchronous else offsets

    def committed(self, tps: list[TopicPartition], timeout: float = -1) -> list[TopicPartition]:
        out = []
        for tp in tps:
            offset, metadata = self.committed_answer.get(tp.partition, (-1001, ""))
            # confluent-kafka hands metadata over as a C string: it ends at the first NUL (the one a
            # Python member's commit carries, trace C07-trailing-nul-of-a-python-commit-ignored).
            metadata = metadata.split("\0", 1)[0]
            out.append(TopicPartition(tp.topic, tp.partition, offset, metadata=metadata))
        return out

    def pause(self, tps: list[TopicPartition]) -> None:
        self.effects.extend({"pause": tp.partition} for tp in tps)

    def resume(self, tps: list[TopicPartition]) -> None:
        self.effects.extend({"resume": tp.partition} for tp in tps)

    def close(self) -> None:
        pass


class TraceWriter:
    """The handoff topic's producer: announcements become effects."""

    def __init__(self, effects: list[Any]) -> None:
        self.effects = effects

    def produce(self, topic: str, key: bytes, value: bytes | None) -> None:
        assert value is not None
        self.effects.append({"announce": {"key": key.decode(), "value": value.decode()}})

    def poll(self, timeout: float = 0) -> int:
        return 0

    def flush(self, timeout: float = -1) -> int:
        return 0


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def real_message(partition: int, offset: int, key: bytes | None, headers: Any) -> Any:
    """A ``confluent_kafka.Message`` (read through its accessors' C functions by the binding);
    ``None`` where the installed confluent-kafka cannot construct one."""
    try:
        return Message(
            topic="orders", partition=partition, offset=offset, key=key, value=b"v", headers=headers
        )
    except TypeError:
        return None


# "offer": each record through ConsumerCore.offer (a Python stand-in for the message, read through
# its methods); "released": as DkgConsumer.consume hands a fetched batch over, a real
# confluent_kafka.Message (read through its accessors' C functions, the quiet partitions' fast path
# where the lanes admit it).
@pytest.mark.parametrize("via", ["offer", "released"])
@pytest.mark.parametrize("path", trace_files(), ids=lambda p: p.stem)
def test_trace(path: Path, via: str) -> None:
    if via == "released" and real_message(0, 0, None, None) is None:
        pytest.skip("this confluent-kafka cannot construct a Message")
    trace = json.loads(path.read_text())
    cfg = trace["config"]
    keys = [base64.b64decode(k) for k in trace["keys_b64"]]
    effects: list[Any] = []

    def on_epoch(change: _native.EpochChange) -> None:
        prev = change.prev
        moved_out = [b64(k) for k in keys if change.moved_out(k)]
        epoch = {
            "partition": change.partition,
            "epoch": change.epoch,
            "prev": None if prev is None else prev.epoch,
            "moved_out_b64": moved_out,
        }
        effects.append({"hook": {"epoch": epoch}})

    def on_split(change: _native.SplitChange) -> None:
        split = {
            "key_b64": b64(change.key),
            "epoch": change.epoch,
            "parts": change.parts,
            "partition": change.partition,
        }
        effects.append({"hook": {"split": split}})

    glue = DkgConsumer(
        {"group.id": cfg["group"], "bootstrap.servers": "127.0.0.1:1"},
        on_epoch=on_epoch,
        on_assign=lambda ps: effects.append({"hook": {"assigned": ps}}),
        on_revoke=lambda ps: effects.append({"hook": {"revoked": ps}}),
        on_split_change=on_split,
        commit_interval=None,
    )
    glue._consumer.close()
    client = TraceClient(effects)
    glue._consumer = client  # type: ignore[assignment]
    glue._writer = TraceWriter(effects)  # type: ignore[assignment]
    core = _native.ConsumerCore(
        cfg["topic"],
        cfg["group"],
        cfg["partitions"],
        max_held=cfg["max_held"],
        stall_timeout=cfg["stall_timeout_ms"] / 1000,
        max_metadata_bytes=cfg["max_metadata_bytes"],
        history=cfg["history"],
        unknown_epoch_wait=cfg["unknown_epoch_wait_ms"] / 1000,
        max_lease=cfg["max_lease_ms"] / 1000,
    )
    glue._core = core
    glue.topic = cfg["topic"]
    book = _native.AssignmentBook()
    now_ms: int = cfg["now_ms"]
    key_of: dict[tuple[int, int], bytes | None] = {}

    for i, step in enumerate(trace["steps"]):
        core.set_clock(step["t_ms"] / 1000, now_ms)
        effects.clear()
        delivered: list[list[int]] = []
        skipped: list[list[int]] = []
        ((kind, arg),) = step["in"].items()

        def hand_out(msg: Any) -> None:
            label = core.last_split
            entry = [msg.partition(), msg.offset()]
            delivered.append(entry if label is None else [*entry, label])

        def prelude() -> None:
            while True:
                if glue._progress_retry_at == 0.0:
                    r = core.take()
                    if r is True:
                        glue._commit_progress()
                        continue
                else:
                    core.processed()
                    r = core.next_ready()
                if r is None:
                    return
                hand_out(r)

        if kind == "control":
            value = arg["value"]
            update = book.apply(arg["key"].encode(), None if value is None else value.encode())
            if update.outcome == "accepted" and update.assignment is not None:
                glue._on_control(update.assignment)
            glue._apply_events()
        elif kind == "handoff":
            value = arg["value"]
            glue._events.append((arg["key"].encode(), None if value is None else value.encode()))
            glue._apply_events()
        elif kind == "assign":
            client.committed_answer = {
                a["partition"]: (-1001 if a["offset"] is None else a["offset"], a["metadata"])
                for a in arg
            }
            glue._on_assign(client, [TopicPartition(cfg["topic"], a["partition"]) for a in arg])  # type: ignore[arg-type]
        elif kind == "revoke":
            glue._revoked(client, [TopicPartition(cfg["topic"], p) for p in arg], lost=False)  # type: ignore[arg-type]
        elif kind in ("record", "next", "commit"):
            prelude()
            if kind == "record":
                key = None if arg["key_b64"] is None else base64.b64decode(arg["key_b64"])
                headers = [
                    (name, None if v is None else base64.b64decode(v)) for name, v in arg["headers"]
                ]
                key_of[(arg["partition"], arg["offset"])] = key
                if via == "offer":
                    msg = FakeMsg(arg["partition"], arg["offset"], key, headers=headers)
                    delivered_now = [msg] if core.offer(msg) else []
                else:
                    msg = real_message(arg["partition"], arg["offset"], key, headers or None)
                    # No progress check: a progress commit this record makes due is the next
                    # step's (its prelude), as with offer.
                    got = core.released([msg], 1, False)
                    assert got is not None and len(got) <= 1 and core.pending == 0
                    delivered_now = got
                for m in delivered_now:
                    hand_out(m)
                if not delivered_now and core.last_outcome == "skipped":
                    skipped.append([arg["partition"], arg["offset"]])
            elif kind == "commit":
                glue.commit(asynchronous=False)
        elif kind == "tick":
            now_ms = arg["now_ms"]
            core.set_clock(step["t_ms"] / 1000, now_ms)
            core.tick()
            pause, resume = core.flow()
            core.take_stalled()
            glue._flow(pause, True)
            glue._flow(resume, False)
        else:
            raise AssertionError(f"step {i}: unknown input {kind!r}")

        out = step["out"]
        where = f"{path.name} step {i} ({kind})"
        want = out.get("delivered", [])
        assert sorted(map(tuple, delivered)) == sorted(map(tuple, want)), where
        per_key_got: dict[Any, list[Any]] = defaultdict(list)
        per_key_want: dict[Any, list[Any]] = defaultdict(list)
        for entries, per_key in ((delivered, per_key_got), (want, per_key_want)):
            for e in entries:
                per_key[key_of.get((e[0], e[1]))].append(list(e))
        assert per_key_got == per_key_want, f"{where}: per-key order"
        assert skipped == out.get("skipped", []), where
        held = {str(p): n for p, n in core.held_counts() if n}
        assert held == out.get("held", {}), where
        assert effects == out.get("effects", []), where
        unknown, clamped, rejected, left_out = core.take_anomalies()
        anomalies: dict[str, Any] = {}
        if unknown:
            anomalies["unknown_epoch"] = unknown
        if clamped:
            anomalies["clamped_leases"] = clamped
        rejected = {r: n for r, n in rejected.items() if n}
        if rejected:
            anomalies["markers_rejected"] = rejected
        if left_out:
            anomalies["windows_left_out"] = left_out
        assert anomalies == out.get("anomalies", {}), where
