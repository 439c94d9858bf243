//! Handoff garbage collection against the shared cases of `spec/garbage/cases.json` (docs/spec.md
//! 9.1, "Lease garbage collection"), which the Java and Python consumers' tests read too: the
//! leases `Core::collectable_leases` names, and the history records below
//! `Core::history_gc_floor` (the drivers track which history records exist; here, the case's).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dkg_kafka_core::fixtures;
use dkg_kafka_protocol::consumer::core::{Core, CoreConfig};
use dkg_kafka_protocol::handoff::{self, HandoffEntry};
use serde_json::Value;

fn cases() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../spec/garbage/cases.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn core(cases: &Value, keep: usize) -> Core<()> {
    let cfg = CoreConfig {
        max_held: 10_000,
        stall_timeout: Duration::from_secs(5),
        max_metadata_bytes: 4096,
        history: keep,
        unknown_epoch_wait: Duration::from_secs(10),
        max_lease: Duration::from_millis(cases["max_lease_ms"].as_u64().unwrap()),
    };
    Core::new(cases["topic"].as_str().unwrap(), "g", 2, cfg)
}

#[test]
fn a_lease_is_collected_only_long_after_it_expired_and_once_its_closing_epoch_settled() {
    let cases = cases();
    let (topic, producer) = (
        cases["topic"].as_str().unwrap(),
        cases["producer"].as_str().unwrap(),
    );
    let lease_cases = cases["lease_cases"].as_array().unwrap();
    assert!(lease_cases.len() >= 8, "the shared cases are all there");
    for case in lease_cases {
        let name = case["name"].as_str().unwrap();
        let mut c = core(&cases, 32);
        c.tick(Duration::ZERO, cases["read_at_ms"].as_u64().unwrap());
        // The lease as it is on the handoff topic, through the decoder every reader uses.
        let mut value = case["lease"].clone();
        let fields = value.as_object_mut().unwrap();
        fields.insert("producer".into(), producer.into());
        fields.insert("topic".into(), topic.into());
        fields.insert("first_epoch".into(), 1.into());
        let key = format!("lease2/{topic}/{producer}");
        let entry = handoff::decode(
            Some(key.as_bytes()),
            Some(serde_json::to_vec(&value).unwrap().as_slice()),
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let HandoffEntry::Lease(lease) = entry else {
            panic!("{name}: not a lease");
        };
        c.on_lease(lease, Duration::ZERO);
        let collected = c
            .collectable_leases(case["now_ms"].as_u64().unwrap())
            .count();
        assert_eq!(
            collected == 1,
            case["collected"].as_bool().unwrap(),
            "{name}"
        );
    }
}

#[test]
fn history_below_the_epochs_every_member_keeps_is_collected() {
    let cases = cases();
    let history_cases = cases["history_cases"].as_array().unwrap();
    assert!(history_cases.len() >= 4, "the shared cases are all there");
    for case in history_cases {
        let name = case["name"].as_str().unwrap();
        let keep = usize::try_from(case["keep"].as_u64().unwrap()).unwrap();
        let mut c = core(&cases, keep);
        let epochs = |field: &str| -> BTreeSet<u64> {
            case[field]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e.as_u64().unwrap())
                .collect()
        };
        let mut keys = BTreeSet::new();
        for epoch in epochs("epochs") {
            let a =
                fixtures::assignment(cases["topic"].as_str().unwrap(), 2, epoch, vec![0, 1], &[]);
            c.on_assignment(Arc::new(a), Duration::ZERO);
            keys.insert(epoch);
        }
        for epoch in epochs("tombstoned") {
            keys.remove(&epoch);
        }
        let floor = c.history_gc_floor();
        let collected: BTreeSet<u64> = keys.range(..floor).copied().collect();
        assert_eq!(collected, epochs("collected"), "{name}");
    }
}
