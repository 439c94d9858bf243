//! `v2/control.json`: retractions and generation records on the control topic.

use super::*;

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
    let r = dkg_core::assignment::Retraction {
        topic: "orders".to_owned(),
        epoch,
        generation: generation.map(str::to_owned),
        created_at_ms: 1_700_000_000_000,
    };
    String::from_utf8(r.to_json()).expect("UTF-8")
}

fn generation(g: &str) -> Record {
    let value = dkg_core::assignment::generation_record(g).expect("a valid generation");
    put(
        dkg_core::assignment::GENERATION_KEY,
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
                            dkg_core::assignment::generation_record(G1).expect("valid"),
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
