"""The golden vectors of ``spec/vectors`` (``docs/spec.md``), through the Python package.

Missing vector files fail these tests. What is checked where:

- ``murmur2.json``, ``lookup.json``, ``reject.json``, ``control.json``, ``v2/split.json``,
  ``v2/reject.json``, ``v2/compact.json``: every case through the
  package's public objects (``murmur2``, ``kafka_partition``, ``Placement.route`` = what the router
  runs per record, ``Assignment.from_json`` and its ``AssignmentError.reason``, ``AssignmentBook``).
  The bucket route of ``lookup.json`` is also recomputed here from the spec's formula in Python.
- ``random.json`` (20 cases x 10^6 keys): the key stream comes from the extension's
  ``spec_random_keys`` and the digest from its ``fnv1a64_partitions`` (a pure-Python loop over
  2x10^7 keys would take minutes); both helpers are checked against Python implementations of the
  README's definitions in ``test_native.py`` and here on each case's first 1000 keys. The 10^6
  lookups themselves go through ``Placement.place_many``, key by key from Python ``bytes``, the
  same path as ``place``; the first 100 partitions are also checked with one ``route`` call per
  key generated in Python.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from dkg_kafka import (
    Assignment,
    AssignmentBook,
    AssignmentError,
    Placement,
    RouteCounters,
    kafka_partition,
    murmur2,
)
from dkg_kafka import _native

from .conftest import vector_file
from .test_native import fnv1a64_py, murmur2_py, splitmix_keys_py


def test_murmur2_vectors() -> None:
    cases = vector_file("murmur2.json")["cases"]
    assert len(cases) >= 40
    for case in cases:
        key = base64.b64decode(case["key_b64"])
        assert murmur2(key) == case["murmur2"], case
        for partitions, expected in case["partitions"].items():
            assert kafka_partition(key, int(partitions)) == expected, (case, partitions)


def test_lookup_vectors() -> None:
    cases = vector_file("lookup.json")["cases"]
    assert cases
    routes: set[str] = set()
    for case in cases:
        a = Assignment.from_json(case["document_json"].encode())
        placement = Placement(case["topic_partitions"], a, RouteCounters())
        doc = json.loads(case["document_json"])
        seed = doc["bucket_hash"]["seed"]
        for k in case["keys"]:
            key = base64.b64decode(k["key_b64"])
            got = placement.route(key)
            assert got == (k["partition"], k["route"]), (case["name"], k)
            routes.add(k["route"])
            if k["route"] == "bucket":
                # The spec's formula, independently of the extension.
                bucket = (murmur2_py(key, seed) & 0x7FFFFFFF) % doc["buckets"]
                assert doc["table"][bucket] == k["partition"], (case["name"], k)
            if k["route"] == "fallback":
                assert k["partition"] == kafka_partition(key, case["topic_partitions"])
    assert routes == {"heavy", "bucket", "fallback"}


def _reject_document(case: dict[str, Any]) -> bytes:
    if case["document_b64"] is not None:
        return base64.b64decode(case["document_b64"])
    size: int = case["generate"]["valid_document_padded_to_bytes"]
    valid: bytes = vector_file("lookup.json")["cases"][0]["document_json"].encode()
    return valid + b" " * (size - len(valid))


def _spec_split_picks(parts: list[tuple[int, int]], n: int) -> list[int]:
    """Spec 4.6's schedule, transcribed: counters from 0; per record add each weight, pick the
    largest counter (lowest index on ties), subtract the weight sum from it."""
    total = sum(w for _, w in parts)
    c = [0] * len(parts)
    out = []
    for _ in range(n):
        best = 0
        for i, (_, w) in enumerate(parts):
            c[i] += w
            if c[i] > c[best]:
                best = i
        c[best] -= total
        out.append(parts[best][0])
    return out


def test_split_vectors() -> None:
    file = vector_file("v2/split.json")
    picks = file["picks_per_split_key"]
    routes: set[str] = set()
    split_keys = 0
    for case in file["cases"]:
        a = Assignment.from_json(case["document_json"].encode())
        assert a.has_split_keys, case["name"]
        placement = Placement(case["topic_partitions"], a, RouteCounters())
        for k in case["keys"]:
            key = base64.b64decode(k["key_b64"])
            assert placement.route(key) == (k["partition"], k["route"]), (case["name"], k)
            assert a.split_of(key) is None or k["route"] == "fallback", (case["name"], k)
            routes.add(k["route"])
        for s in case["split_keys"]:
            key = base64.b64decode(s["key_b64"])
            parts = [(p["partition"], p["weight"]) for p in s["parts"]]
            assert a.split_of(key) == parts, case["name"]
            assert _spec_split_picks(parts, picks) == s["picks"], case["name"]
            # One fresh instance per document: the router's path and the plain lookup share the
            # key's schedule, so alternate them.
            got = [
                placement.route(key)[0] if n % 2 else a.partition_for(key) for n in range(picks)
            ]
            assert got == s["picks"], case["name"]
            assert placement.route(key)[1] == "split"
            split_keys += 1
    assert routes == {"heavy", "bucket", "fallback"}
    assert split_keys >= 10


def test_compact_vectors() -> None:
    twins = 0
    for case in vector_file("v2/compact.json")["cases"]:
        a = Assignment.from_json(case["document_json"].encode())
        doc = json.loads(case["document_json"])
        width = doc["table_width"]
        raw = base64.b64decode(doc["table_b64"])
        # Spec 4.6: little-endian entries of table_width bytes.
        table = [int.from_bytes(raw[i : i + width], "little") for i in range(0, len(raw), width)]
        assert a.table == table, case["name"]
        if case["twin_document_json"] is not None:
            assert Assignment.from_json(case["twin_document_json"].encode()) == a, case["name"]
            twins += 1
        placement = Placement(case["topic_partitions"], a, RouteCounters())
        for k in case["keys"]:
            key = base64.b64decode(k["key_b64"])
            assert placement.route(key) == (k["partition"], k["route"]), (case["name"], k)
    assert twins >= 2


def test_reject_vectors() -> None:
    cases = vector_file("reject.json")["cases"]
    assert len(cases) > 100
    _check_rejects(cases)


def test_v2_reject_vectors() -> None:
    cases = vector_file("v2/reject.json")["cases"]
    assert len(cases) > 20
    _check_rejects(cases)


def _check_rejects(cases: list[dict[str, Any]]) -> None:
    for case in cases:
        data = _reject_document(case)
        with pytest.raises(AssignmentError) as info:
            Assignment.from_json(data)
        assert info.value.reason == case["reason"], (case["name"], str(info.value))
        # The control topic's book gives the same label (it decodes before it compares the
        # record key with the document's topic, so any valid key will do).
        update = AssignmentBook().apply(b"orders", data)
        assert (update.outcome, update.reason) == ("rejected", case["reason"]), case["name"]


def test_control_vectors() -> None:
    cases = vector_file("control.json")["cases"]
    assert cases
    for case in cases:
        book = AssignmentBook()
        assert len(case["records"]) == len(case["expect"]), case["name"]
        for i, (record, expect) in enumerate(zip(case["records"], case["expect"])):
            if "key_b64" in record:
                key: bytes | None = base64.b64decode(record["key_b64"])
            elif record["key_utf8"] is not None:
                key = record["key_utf8"].encode()
            else:
                key = None
            value = None if record["value_json"] is None else record["value_json"].encode()
            update = book.apply(key, value)
            where = (case["name"], i)
            assert update.outcome == expect["outcome"], (where, update.detail)
            assert update.reason == expect.get("reason"), where
            topic = record["key_utf8"] if "key_b64" not in record else None
            current = book.get(topic) if topic else None
            assert (current.epoch if current else None) == expect["epoch_after"], where


def test_random_vectors() -> None:
    """10^6 random keys under 20 random assignments give the Rust implementation's partitions."""
    vectors = vector_file("random.json")
    cases = vectors["cases"]
    count = vectors["key_count"]
    assert len(cases) == 20 and count == 1_000_000
    fallback_cases = 0
    heavy_hits = 0
    for case in cases:
        a = Assignment.from_json(case["document_json"].encode())
        placement = Placement(case["topic_partitions"], a, RouteCounters())
        fallback_cases += not placement.in_effect
        keys = _native.spec_random_keys(case["seed"], count)
        head = splitmix_keys_py(case["seed"], 1000)
        assert keys[:1000] == head, case["seed"]
        first = [placement.route(k)[0] for k in head[:100]]
        assert first == case["first_partitions"], case["seed"]
        partitions = placement.place_many(keys)
        del keys
        assert len(partitions) == count
        assert _native.fnv1a64_partitions(partitions[:1000]) == fnv1a64_py(partitions[:1000])
        assert _native.fnv1a64_partitions(partitions) == case["digest"], case["seed"]
        heavy_hits += sum(placement.route(k)[1] == "heavy" for k, _, _ in a.heavy)
    assert fallback_cases == 2
    # The documents' heavy keys come from their key streams, so the heavy route is exercised.
    assert heavy_hits > 0
