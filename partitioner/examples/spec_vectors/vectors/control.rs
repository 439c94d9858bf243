//! `control.json` and `v2/control.json`: control-topic record sequences and what a producer's book
//! does with each record (version 1; then retractions and generation records).

use super::*;

#[derive(Serialize)]
struct ControlCase {
    name: &'static str,
    description: &'static str,
    records: Vec<ControlRecordOut>,
    expect: Vec<Expect>,
}

#[derive(Serialize)]
struct ControlRecordOut {
    key_utf8: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key_b64: Option<String>,
    value_json: Option<String>,
}

#[derive(Serialize)]
struct Expect {
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    epoch_after: Option<u64>,
    /// The epoch floor a retraction document left (`v2/control.json` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    floor_after: Option<u64>,
}

/// The `outcome` (and reject `reason`) label of what a record did: `accepted`, `unchanged`,
/// `retracted`, `rejected`, and for version 2 `reset` (state dropped) or `reread` (state dropped,
/// read the control topic again from the beginning).
pub fn outcome_of(update: &ControlUpdate) -> (&'static str, Option<&'static str>) {
    match update {
        ControlUpdate::Adopted(_) => ("accepted", None),
        ControlUpdate::Unchanged { .. } => ("unchanged", None),
        ControlUpdate::Retracted { .. } => ("retracted", None),
        ControlUpdate::Reset { reread: false, .. } => ("reset", None),
        ControlUpdate::Reset { reread: true, .. } => ("reread", None),
        ControlUpdate::Rejected { reason, .. } => ("rejected", Some(reason.as_str())),
    }
}

/// A control record: key bytes (None = no key) and value (None = tombstone).
type Record = (Option<Vec<u8>>, Option<String>);

fn control_doc(topic: &str, epoch: u64, table: &[u32]) -> String {
    let a = assignment(AssignmentParts {
        topic: topic.to_owned(),
        epoch,
        table: table.to_vec(),
        ..document(3, table.len() as u32, DEFAULT_BUCKET_SEED, &[], 0).into_parts()
    });
    doc_json(&a)
}

/// `document` (at epoch [`MAX_EPOCH`]) with its epoch replaced by `epoch` as text: an epoch over
/// the limit cannot be built through [`Assignment::new`].
fn over_max_epoch(document: &str, epoch: u64) -> String {
    let at = format!(r#""epoch":{MAX_EPOCH}"#);
    assert_eq!(document.matches(&at).count(), 1, "one epoch {MAX_EPOCH}");
    document.replacen(&at, &format!(r#""epoch":{epoch}"#), 1)
}

fn put(key: &str, value: String) -> Record {
    (Some(key.as_bytes().to_vec()), Some(value))
}

fn tombstone(key: &str) -> Record {
    (Some(key.as_bytes().to_vec()), None)
}

/// The outcome of each record applied in order to one book, as the spec states it.
fn expectations(records: &[Record]) -> Vec<Expect> {
    let mut book = AssignmentBook::new();
    records
        .iter()
        .map(|(key, value)| {
            let update = book.apply(key.as_deref(), value.as_deref().map(str::as_bytes));
            let topic = key.as_deref().and_then(|k| std::str::from_utf8(k).ok());
            let epoch_after = topic.and_then(|t| book.get(t)).map(|a| a.epoch());
            let floor_after = topic.and_then(|t| book.retraction(t)).map(|r| r.epoch);
            let (outcome, reason) = outcome_of(&update);
            Expect {
                outcome,
                reason,
                epoch_after,
                floor_after,
            }
        })
        .collect()
}

fn control_case(
    name: &'static str,
    description: &'static str,
    records: Vec<Record>,
    want: &[(&str, Option<u64>)],
) -> ControlCase {
    let expect = expectations(&records);
    let got: Vec<(String, Option<u64>)> = expect
        .iter()
        .map(|e| {
            let label = e
                .reason
                .map_or(e.outcome.to_owned(), |r| format!("{}:{r}", e.outcome));
            (label, e.epoch_after)
        })
        .collect();
    let want: Vec<(String, Option<u64>)> =
        want.iter().map(|(l, e)| ((*l).to_owned(), *e)).collect();
    assert_eq!(got, want, "control case {name}");
    let records = records
        .into_iter()
        .map(|(key, value)| {
            let text = key.as_deref().and_then(|k| std::str::from_utf8(k).ok());
            ControlRecordOut {
                key_utf8: text.map(str::to_owned),
                key_b64: key.as_deref().filter(|_| text.is_none()).map(b64),
                value_json: value,
            }
        })
        .collect();
    ControlCase {
        name,
        description,
        records,
        expect,
    }
}

#[allow(clippy::too_many_lines)]
pub(super) fn control_file() -> String {
    let o = |epoch: u64| control_doc("orders", epoch, &[0, 1, 2, 0]);
    let o_other = |epoch: u64| control_doc("orders", epoch, &[2, 1, 0, 0]);
    let p = |epoch: u64| control_doc("payments", epoch, &[1, 1, 2]);
    let pretty = Assignment::from_json(o(3).as_bytes())
        .expect("valid")
        .to_json_pretty();
    let later = {
        let a = Assignment::from_json(o(3).as_bytes()).expect("valid");
        doc_json(&assignment(AssignmentParts {
            created_at_ms: 1_700_000_000_001,
            ..a.into_parts()
        }))
    };
    let two_heavy = |reversed: bool| {
        let mut heavy = vec![b"a".to_vec(), b"b".to_vec()];
        if reversed {
            heavy.reverse();
        }
        let mut parts = document(3, 4, DEFAULT_BUCKET_SEED, &heavy, 0).into_parts();
        parts.epoch = 4;
        for h in &mut parts.heavy {
            h.partition = 1;
            h.weight = 5;
        }
        doc_json(&assignment(parts))
    };
    let longest = "t".repeat(MAX_TOPIC_LEN);
    let cases = vec![
        control_case(
            "epoch_increases",
            "Epochs 1, 2, 5 of one topic: each is adopted (gaps are fine).",
            vec![
                put("orders", o(1)),
                put("orders", o(2)),
                put("orders", o(5)),
            ],
            &[
                ("accepted", Some(1)),
                ("accepted", Some(2)),
                ("accepted", Some(5)),
            ],
        ),
        control_case(
            "stale_epoch",
            "Epoch 5, then epoch 4 (rejected, 5 stays), then epoch 5 again byte for byte \
             (unchanged).",
            vec![
                put("orders", o(5)),
                put("orders", o(4)),
                put("orders", o(5)),
            ],
            &[
                ("accepted", Some(5)),
                ("rejected:stale_epoch", Some(5)),
                ("unchanged", Some(5)),
            ],
        ),
        control_case(
            "epoch_conflict",
            "Epoch 5, then a different document under epoch 5 (rejected: the first stays), then \
             epoch 6.",
            vec![
                put("orders", o(5)),
                put("orders", o_other(5)),
                put("orders", o(6)),
            ],
            &[
                ("accepted", Some(5)),
                ("rejected:epoch_conflict", Some(5)),
                ("accepted", Some(6)),
            ],
        ),
        control_case(
            "identical_republication",
            "Epoch 3 published three times: the same bytes, then the same content pretty-printed \
             (equality is on the decoded fields, not the bytes).",
            vec![
                put("orders", o(3)),
                put("orders", o(3)),
                put("orders", pretty),
            ],
            &[
                ("accepted", Some(3)),
                ("unchanged", Some(3)),
                ("unchanged", Some(3)),
            ],
        ),
        control_case(
            "conflict_on_any_field",
            "Under the current epoch, a document that differs only in created_at_ms, and one that \
             lists the same heavy keys in another order, are conflicts (every decoded field \
             counts, including list order, even where routing would not change).",
            vec![
                put("orders", o(3)),
                put("orders", later),
                put("orders", two_heavy(false)),
                put("orders", two_heavy(true)),
            ],
            &[
                ("accepted", Some(3)),
                ("rejected:epoch_conflict", Some(3)),
                ("accepted", Some(4)),
                ("rejected:epoch_conflict", Some(4)),
            ],
        ),
        control_case(
            "tombstone_resets_the_epoch_floor",
            "Epoch 7, a tombstone (retracted: Kafka's placement), then epoch 2, which is accepted \
             (today's rule: a retraction clears the floor), another tombstone, and a tombstone \
             for a topic without an assignment (unchanged).",
            vec![
                put("orders", o(7)),
                tombstone("orders"),
                put("orders", o(2)),
                tombstone("orders"),
                tombstone("orders"),
            ],
            &[
                ("accepted", Some(7)),
                ("retracted", None),
                ("accepted", Some(2)),
                ("retracted", None),
                ("unchanged", None),
            ],
        ),
        control_case(
            "topic_mismatch",
            "A record keyed \"orders\" carrying a document for \"payments\": rejected with or \
             without a current assignment, and the current one stays. A key that is not a legal \
             topic name (\"..\") is only ever a mismatch.",
            vec![
                put("orders", p(1)),
                put("orders", o(1)),
                put("orders", p(9)),
                put("..", o(2)),
            ],
            &[
                ("rejected:topic_mismatch", None),
                ("accepted", Some(1)),
                ("rejected:topic_mismatch", Some(1)),
                ("rejected:topic_mismatch", None),
            ],
        ),
        control_case(
            "bad_key",
            "No key, an empty key, a key that is not UTF-8 (bytes ff fe), and a tombstone without \
             a key: all rejected as bad_key (epoch_after is null: the record names no topic), \
             and the current assignment of \"orders\" is untouched.",
            vec![
                put("orders", o(1)),
                (None, Some(o(2))),
                (Some(Vec::new()), Some(o(2))),
                (Some(vec![0xff, 0xfe]), Some(o(2))),
                (None, None),
                put("orders", o(2)),
            ],
            &[
                ("accepted", Some(1)),
                ("rejected:bad_key", None),
                ("rejected:bad_key", None),
                ("rejected:bad_key", None),
                ("rejected:bad_key", None),
                ("accepted", Some(2)),
            ],
        ),
        control_case(
            "rejected_values_keep_the_last_good",
            "Epoch 1, then values that fail to decode (malformed, a newer version, out of range, \
             invalid): each is rejected and epoch 1 stays; then epoch 2 is adopted.",
            vec![
                put("orders", o(1)),
                put("orders", "{not json".to_owned()),
                put("orders", o(2).replacen("\"version\":1", "\"version\":3", 1)),
                put(
                    "orders",
                    o(2).replacen("\"table\":[0,1,2,0]", "\"table\":[0,1,5,0]", 1),
                ),
                put(
                    "orders",
                    o(2).replacen("\"partitions\":3", "\"partitions\":0", 1),
                ),
                put("orders", o(2)),
            ],
            &[
                ("accepted", Some(1)),
                ("rejected:malformed_json", Some(1)),
                ("rejected:unsupported_version", Some(1)),
                ("rejected:out_of_range", Some(1)),
                ("rejected:invalid", Some(1)),
                ("accepted", Some(2)),
            ],
        ),
        control_case(
            "first_record_rejected",
            "A rejected record on an empty state leaves the topic without an assignment.",
            vec![put("orders", "[]".to_owned()), put("orders", o(1))],
            &[("rejected:malformed_json", None), ("accepted", Some(1))],
        ),
        control_case(
            "epoch_zero",
            "Epoch 0 is a valid epoch; re-publishing it is a no-op and epoch 1 follows.",
            vec![
                put("orders", o(0)),
                put("orders", o(0)),
                put("orders", o(1)),
            ],
            &[
                ("accepted", Some(0)),
                ("unchanged", Some(0)),
                ("accepted", Some(1)),
            ],
        ),
        control_case(
            "epoch_limit",
            "Epoch 2^53 - 1 (the largest) is accepted; 2^53 and 18446744073709551615 are rejected \
             (out_of_range) and the assignment at 2^53 - 1 stays; a tombstone clears the floor and \
             epoch 1 is accepted (the only way on after the largest epoch, with a new control-topic \
             generation, spec 6.4).",
            vec![
                put("orders", o(MAX_EPOCH)),
                put("orders", over_max_epoch(&o(MAX_EPOCH), MAX_EPOCH + 1)),
                put("orders", over_max_epoch(&o(MAX_EPOCH), u64::MAX)),
                tombstone("orders"),
                put("orders", o(1)),
            ],
            &[
                ("accepted", Some(MAX_EPOCH)),
                ("rejected:out_of_range", Some(MAX_EPOCH)),
                ("rejected:out_of_range", Some(MAX_EPOCH)),
                ("retracted", None),
                ("accepted", Some(1)),
            ],
        ),
        control_case(
            "epoch_out_of_range_keeps_the_assignment",
            "Epoch 5, then a well-formed document at epoch 18446744073709551615 with another table \
             (rejected, out_of_range: producers keep epoch 5's placement), then epoch 6 is adopted.",
            vec![
                put("orders", o(5)),
                put("orders", over_max_epoch(&o_other(MAX_EPOCH), u64::MAX)),
                put("orders", o(6)),
            ],
            &[
                ("accepted", Some(5)),
                ("rejected:out_of_range", Some(5)),
                ("accepted", Some(6)),
            ],
        ),
        control_case(
            "legal_topic_names",
            "The longest legal topic name (249 characters) and one using every allowed \
             punctuation character are accepted; documents match their key byte for byte.",
            vec![
                put(&longest, control_doc(&longest, 1, &[0, 1, 2])),
                put("a.B_c-9", control_doc("a.B_c-9", 3, &[0, 1, 2])),
            ],
            &[("accepted", Some(1)), ("accepted", Some(3))],
        ),
        control_case(
            "two_topics_interleaved",
            "Two topics on one control topic: the epoch rules apply per topic (epoch 3 of \
             payments is stale after its 5 even though orders is at 2; a tombstone of orders \
             leaves payments alone).",
            vec![
                put("orders", o(1)),
                put("payments", p(5)),
                put("orders", o(2)),
                put("payments", p(3)),
                tombstone("orders"),
                put("payments", p(6)),
                put("orders", o(1)),
            ],
            &[
                ("accepted", Some(1)),
                ("accepted", Some(5)),
                ("accepted", Some(2)),
                ("rejected:stale_epoch", Some(5)),
                ("retracted", None),
                ("accepted", Some(6)),
                ("accepted", Some(1)),
            ],
        ),
    ];
    cases_file(&[], &cases)
}

// ---------------------------------------------------------------------------------------------
// v2/control.json

/// Generation ids of `v2/control.json`.
const G1: &str = "0123456789abcdef0123456789abcdef";
const G2: &str = "fedcba9876543210fedcba9876543210";

/// `control_doc` of "orders" at `epoch`, naming `generation` if given (then version 2).
fn gen_doc(epoch: u64, generation: Option<&str>) -> String {
    let a = Assignment::from_json(control_doc("orders", epoch, &[0, 1, 2, 0]).as_bytes())
        .expect("valid");
    match generation {
        Some(g) => doc_json(&a.with_generation(g).expect("a valid generation")),
        None => doc_json(&a),
    }
}

fn retraction(epoch: u64, generation: Option<&str>) -> String {
    let r = dkg_kafka_core::assignment::Retraction {
        topic: "orders".to_owned(),
        epoch,
        generation: generation.map(str::to_owned),
        created_at_ms: 1_700_000_000_000,
    };
    String::from_utf8(r.to_json()).expect("UTF-8")
}

fn generation(g: &str) -> Record {
    let value = dkg_kafka_core::assignment::generation_record(g).expect("a valid generation");
    put(
        dkg_kafka_core::assignment::GENERATION_KEY,
        String::from_utf8(value).expect("UTF-8"),
    )
}

#[allow(clippy::too_many_lines)]
pub(super) fn v2_control_file() -> String {
    let cases = vec![
        control_case(
            "retraction_keeps_the_floor",
            "Epoch 5, then a retraction document at 7: producers return to Kafka's placement but the \
             floor stays 7: epoch 6 is stale, a different document at 7 a conflict, the same \
             retraction again unchanged; epoch 8 is accepted.",
            vec![
                put("orders", gen_doc(5, None)),
                put("orders", retraction(7, None)),
                put("orders", gen_doc(6, None)),
                put("orders", gen_doc(7, None)),
                put("orders", retraction(7, None)),
                put("orders", gen_doc(8, None)),
            ],
            &[
                ("accepted", Some(5)),
                ("retracted", None),
                ("rejected:stale_epoch", None),
                ("rejected:epoch_conflict", None),
                ("unchanged", None),
                ("accepted", Some(8)),
            ],
        ),
        control_case(
            "retraction_without_assignment",
            "A retraction at 3 for a topic without assignment sets the floor (unchanged routing); a \
             later retraction at 2 is stale, 4 raises the floor, epoch 4 is a conflict, 5 accepted.",
            vec![
                put("orders", retraction(3, None)),
                put("orders", retraction(2, None)),
                put("orders", retraction(4, None)),
                put("orders", gen_doc(4, None)),
                put("orders", gen_doc(5, None)),
            ],
            &[
                ("unchanged", None),
                ("rejected:stale_epoch", None),
                ("unchanged", None),
                ("rejected:epoch_conflict", None),
                ("accepted", Some(5)),
            ],
        ),
        control_case(
            "retraction_at_or_below_the_current_epoch",
            "A retraction at the current epoch 5 is a conflict (a different document at that epoch), \
             at 4 stale; the assignment stays.",
            vec![
                put("orders", gen_doc(5, None)),
                put("orders", retraction(5, None)),
                put("orders", retraction(4, None)),
            ],
            &[
                ("accepted", Some(5)),
                ("rejected:epoch_conflict", Some(5)),
                ("rejected:stale_epoch", Some(5)),
            ],
        ),
        control_case(
            "retraction_epoch_limit",
            "A retraction at 2^53 or 18446744073709551615 is rejected (out_of_range) and changes \
             nothing; one at 2^53 - 1 (the largest) sets the floor; a retraction with an illegal \
             topic and epoch 2^53 is invalid (the topic is checked first).",
            vec![
                put("orders", gen_doc(5, None)),
                put("orders", retraction(MAX_EPOCH + 1, None)),
                put("orders", retraction(u64::MAX, None)),
                put(
                    "orders",
                    retraction(MAX_EPOCH + 1, None).replacen(
                        r#""topic":"orders""#,
                        r#""topic":"..""#,
                        1,
                    ),
                ),
                put("orders", retraction(MAX_EPOCH, None)),
                put("orders", gen_doc(6, None)),
            ],
            &[
                ("accepted", Some(5)),
                ("rejected:out_of_range", Some(5)),
                ("rejected:out_of_range", Some(5)),
                ("rejected:invalid", Some(5)),
                ("retracted", None),
                ("rejected:stale_epoch", None),
            ],
        ),
        control_case(
            "tombstone_clears_a_retraction_floor",
            "A tombstone after a retraction document clears its floor too (version 1 meaning): epoch \
             1 is then accepted.",
            vec![
                put("orders", gen_doc(5, None)),
                put("orders", retraction(6, None)),
                tombstone("orders"),
                put("orders", gen_doc(1, None)),
            ],
            &[
                ("accepted", Some(5)),
                ("retracted", None),
                ("unchanged", None),
                ("accepted", Some(1)),
            ],
        ),
        control_case(
            "generation_first_record",
            "The generation record (key @generation) is adopted as the first one; documents naming it \
             and documents naming none are accepted; a tombstone on @generation changes nothing.",
            vec![
                generation(G1),
                put("orders", gen_doc(1, Some(G1))),
                put("orders", gen_doc(2, None)),
                put("orders", retraction(3, Some(G1))),
                tombstone("@generation"),
                put("orders", gen_doc(4, Some(G1))),
            ],
            &[
                ("unchanged", None),
                ("accepted", Some(1)),
                ("accepted", Some(2)),
                ("retracted", None),
                ("unchanged", None),
                ("accepted", Some(4)),
            ],
        ),
        control_case(
            "generation_change_resets",
            "A generation record with a new id (the control topic was recreated, the reader is at its \
             beginning): every topic's state is dropped (reset), so a lower epoch of the new \
             generation is accepted; the same generation record again changes nothing \
             (epoch_after is null for the @generation key: it names no topic).",
            vec![
                generation(G1),
                put("orders", gen_doc(5, Some(G1))),
                generation(G2),
                put("orders", gen_doc(1, Some(G2))),
                generation(G2),
            ],
            &[
                ("unchanged", None),
                ("accepted", Some(5)),
                ("reset", None),
                ("accepted", Some(1)),
                ("unchanged", None),
            ],
        ),
        control_case(
            "unknown_generation_asks_for_one_reread",
            "A document of a generation not in force: the state is dropped and the driver must read \
             from the beginning (reread). The records after it are that re-read: G1 again, its \
             document, then the same G2 document, now rejected (one re-read per generation).",
            vec![
                generation(G1),
                put("orders", gen_doc(5, Some(G1))),
                put("orders", gen_doc(6, Some(G2))),
                generation(G1),
                put("orders", gen_doc(5, Some(G1))),
                put("orders", gen_doc(6, Some(G2))),
                put("orders", retraction(7, Some(G2))),
            ],
            &[
                ("unchanged", None),
                ("accepted", Some(5)),
                ("reread", None),
                ("unchanged", None),
                ("accepted", Some(5)),
                ("rejected:generation_mismatch", Some(5)),
                ("rejected:generation_mismatch", Some(5)),
            ],
        ),
        control_case(
            "generation_records_checked",
            "A generation record under a topic key is invalid, one with an id not 32 lowercase hex \
             digits invalid, one with an extra member malformed; an assignment under @generation \
             is a topic mismatch; a retraction document in version 1, or of another topic, rejected.",
            vec![
                (
                    Some(b"orders".to_vec()),
                    Some(
                        String::from_utf8(
                            dkg_kafka_core::assignment::generation_record(G1).expect("valid"),
                        )
                        .expect("UTF-8"),
                    ),
                ),
                put(
                    "@generation",
                    format!(
                        r#"{{"format":"dkg.assignment","version":2,"kind":"generation","generation":"{}"}}"#,
                        G1.to_uppercase()
                    ),
                ),
                put(
                    "@generation",
                    format!(
                        r#"{{"format":"dkg.assignment","version":2,"kind":"generation","generation":"{G1}","epoch":1}}"#
                    ),
                ),
                put("@generation", gen_doc(1, None)),
                put(
                    "orders",
                    retraction(3, None).replacen(r#""version":2"#, r#""version":1"#, 1),
                ),
                put("payments", retraction(3, None)),
                put(
                    "orders",
                    retraction(3, None).replacen(
                        r#""kind":"retraction""#,
                        r#""kind":"chunked""#,
                        1,
                    ),
                ),
            ],
            &[
                ("rejected:invalid", None),
                ("rejected:invalid", None),
                ("rejected:malformed_json", None),
                ("rejected:topic_mismatch", None),
                ("rejected:malformed_json", None),
                ("rejected:topic_mismatch", None),
                ("rejected:malformed_json", None),
            ],
        ),
    ];
    cases_file(&[], &cases)
}
