//! Fuzz the control-topic update sequence (`AssignmentBook::apply`, spec section 6.3): any
//! sequence of records, valid documents among arbitrary bytes, must never panic, and the book's
//! state must follow the rules: a rejected or unchanged record leaves every topic as it was, an
//! adoption makes exactly that assignment current for its own topic (the record key) with an epoch
//! above the one before, a retraction removes it, and every other topic is untouched.
//!
//! `scripts/fuzz control_book` (records framed as in `frames.rs`).
#![no_main]

use std::collections::BTreeMap;
use std::sync::Arc;

use dkg_kafka_core::Assignment;
use dkg_kafka_protocol::book::{AssignmentBook, ControlUpdate};
use libfuzzer_sys::fuzz_target;

#[path = "frames.rs"]
mod frames;

fn snapshot(book: &AssignmentBook) -> BTreeMap<String, Arc<Assignment>> {
    book.iter().map(|a| (a.topic().to_owned(), Arc::clone(a))).collect()
}

fuzz_target!(|data: &[u8]| {
    let mut book = AssignmentBook::new();
    for (key, value) in frames::records(data) {
        let before = snapshot(&book);
        let update = book.apply(key, value);
        let after = snapshot(&book);
        match update {
            ControlUpdate::Adopted(a) => {
                let topic = a.topic().to_owned();
                assert_eq!(key, Some(topic.as_bytes()), "adopted under another key");
                assert!(value.is_some());
                assert_eq!(after.get(&topic), Some(&a));
                if let Some(old) = before.get(&topic) {
                    assert!(a.epoch() > old.epoch(), "epoch {} after {}", a.epoch(), old.epoch());
                }
                for (t, old) in &before {
                    if *t != topic {
                        assert_eq!(after.get(t), Some(old), "adoption for {topic} changed {t}");
                    }
                }
                // What was adopted is a valid document: it round-trips.
                let again = Assignment::from_json(&a.to_json()).expect("adopted documents re-decode");
                assert_eq!(*a, again);
            }
            ControlUpdate::Retracted { topic } => {
                // A tombstone or a retraction document (format version 2).
                assert!(before.contains_key(&topic) && !after.contains_key(&topic));
                assert_eq!(after.len() + 1, before.len());
            }
            ControlUpdate::Reset { .. } => assert!(after.is_empty(), "a reset drops every topic"),
            ControlUpdate::Unchanged { .. } | ControlUpdate::Rejected { .. } => {
                assert_eq!(before, after, "{update:?} changed the book");
            }
        }
        for (topic, a) in &after {
            assert_eq!(a.topic(), topic);
            assert!(a.partition_for(b"any key") < a.partitions());
        }
    }
});
