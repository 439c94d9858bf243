"""The differential check of the assignment decoder: every input of the committed fuzz corpus
(``spec/corpus/assignment/``, minimised by ``cargo fuzz cmin``) gets from ``Assignment.from_json``
the verdict the Rust decoder gives it (``spec/corpus/assignment.json``, regenerated and compared by
``crates/dkg-protocol/tests/corpus_verdicts.rs``): accepted, or rejected with the same
``AssignmentError.reason``. The package decodes with the Rust crate, so this checks the binding: the
bytes reach the decoder unchanged and every rejection carries the reason the book would give.
"""

from __future__ import annotations

import json

from dkg_kafka import Assignment, AssignmentError

from .conftest import REPO_ROOT

CORPUS = REPO_ROOT / "spec" / "corpus"


def _revalidate(a: Assignment, data: bytes) -> None:
    n = a.partitions
    assert 1 <= n and 0 <= a.epoch <= 2**53 - 1 and a.topic
    table = a.table
    assert len(table) == a.buckets and all(0 <= p < n for p in table)
    for key in (b"", b"hot", b"cold", data):
        assert 0 <= a.bucket(key) < a.buckets
        assert 0 <= a.partition_for(key) < n
    for key, partition, _weight in a.heavy:
        parts = a.split_of(key)
        if parts is None:
            assert a.route(key) == (partition, "heavy")
        else:
            assert a.route(key)[1] == "split" and all(0 <= p < n for p, _ in parts)


def test_corpus_verdicts_match_rust() -> None:
    want: dict[str, str] = json.loads((CORPUS / "assignment.json").read_text())["verdicts"]
    files = sorted(p for p in (CORPUS / "assignment").iterdir() if p.is_file())
    assert sorted(p.name for p in files) == sorted(want), "the verdicts name exactly the corpus files"
    assert len(files) >= 300
    failures: list[str] = []
    for path in files:
        data = path.read_bytes()
        try:
            a = Assignment.from_json(data)
        except AssignmentError as e:
            got = e.reason
        else:
            _revalidate(a, data)
            got = "accept"
        if got != want[path.name]:
            failures.append(f"{path.name}: {got}, Rust: {want[path.name]}")
    assert not failures, f"{len(failures)} of {len(files)} differ:\n" + "\n".join(failures)
