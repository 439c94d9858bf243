//! The scenarios of the conformance traces, one function per trace, named after the rule it pins
//! (`docs/spec.md` 9.3). Each asserts what its rule says about the outputs recorded, so a change of
//! the core that contradicts a rule stops the generator rather than rewriting the trace.

use crate::driver::{Config, Effect, NOW_MS, Out, Trace, Y, Z, doc};
use dkg_core::assignment::Assignment;

/// The producers' leases run until this wall-clock time (30 s after the start).
const LEASE_UNTIL: u64 = NOW_MS + 30_000;

const HOT: &[u8] = b"hot";
const COLD: &[u8] = b"cold";

fn trace(name: &str, description: &str, keys: &[&[u8]]) -> Trace {
    Trace::new(name, description, keys, Config::default())
}

/// Epoch 1 known, producer Y live from epoch 0, `owned` assigned without committed state, Y's
/// marker of 1 (no record before it) passed on every owned partition, the other partitions
/// announced as drained 1 by another member: settled 1.
fn settled(t: &mut Trace, doc1: &Assignment, owned: &[u32]) {
    t.control(doc1);
    t.lease(Y, 0, LEASE_UNTIL, None);
    let parts: Vec<(u32, Option<i64>, &str)> = owned.iter().map(|&p| (p, None, "")).collect();
    t.assign(&parts);
    t.marker(Y, 1, &[0; 4]);
    t.next();
    for p in 0..4 {
        if !owned.contains(&p) {
            t.progress(p, 1);
        }
    }
}

fn delivered(out: &Out) -> Vec<(u32, i64)> {
    out.delivered
        .iter()
        .map(|d| (u32::try_from(d[0]).unwrap_or(u32::MAX), d[1]))
        .collect()
}

fn held(out: &Out, partition: u32) -> usize {
    out.held.get(&partition.to_string()).copied().unwrap_or(0)
}

/// `(partition, drained)` of every progress announced.
fn announced(out: &Out) -> Vec<(u32, u64)> {
    out.effects
        .iter()
        .filter_map(|e| match e {
            Effect::Announce { value, .. } => {
                let v: serde_json::Value = serde_json::from_str(value).ok()?;
                Some((
                    u32::try_from(v["partition"].as_u64()?).ok()?,
                    v["drained"].as_u64()?,
                ))
            }
            _ => None,
        })
        .collect()
}

/// `(partition, offset, metadata)` of every offset committed.
fn commits(out: &Out) -> Vec<(u32, i64, String)> {
    out.effects
        .iter()
        .filter_map(|e| match e {
            Effect::Commit(c) => Some(c),
            _ => None,
        })
        .flatten()
        .map(|c| (c.partition, c.offset, c.metadata.clone()))
        .collect()
}

#[track_caller]
fn check(ok: bool, rule: &str, what: &str) {
    assert!(ok, "{rule}: {what}");
}

/// Every trace, in file-name order.
pub fn all() -> Vec<Trace> {
    let mut all = vec![
        c01_last_well_formed_epoch_header(),
        c02_lease_clamped_to_max_lease(),
        c02_expired_lease_not_awaited(),
        c02_closed_lease_awaited_up_to_its_epoch(),
        c02_lease_tombstone_forgets_producer(),
        c03_latest_marker_per_producer(),
        c03_marker_rejects_counted(),
        c03_marker_applies_to_partition_assigned_later(),
        c03_marker_applied_again_when_lease_read_again(),
        c04_reached_when_position_at_end(),
        c04_committed_offset_counts_as_position(),
        c05_held_record_of_its_epoch_does_not_block(),
        c05_lower_epoch_passed_while_older_record_waits(),
        c06_drained_waits_for_every_awaited_producer(),
        c06_first_epoch_not_awaited(),
        c06_drained_falls_when_a_lease_appears(),
        c07_hook_commit_then_announce(),
        c07_metadata_over_limit_leaves_out_window(),
        c08_held_until_old_partition_drained(),
        c08_unknown_assignment_counts_every_partition(),
        c08_epochs_below_settled_not_waited_for(),
        c09_held_records_released_in_key_order(),
        c10_unstamped_and_keyless(),
        c10_unstamped_queues_behind_held_records(),
        c11_skip_window(),
        c11_revoked_then_taken_again(),
        c12_skip_passed(),
        c13_pause_and_resume_when_halved(),
        c13_stall_timeout_resumes(),
        c13_resumed_at_half_of_max_held(),
        c14_split_label_of_unstamped_records(),
        c15_whole_to_split_waits_for_old_home(),
        c15_split_record_that_may_be_older_blocks_marker(),
        c16_split_to_whole_waits_for_every_part(),
        c17_between_two_splits_nothing_waits(),
        c18_unplaced_record_whole_and_split_hooks(),
        c19_unknown_epoch_released_after_wait(),
        c19_unknown_epoch_becomes_known(),
        c19_unknown_epoch_waits_behind_earlier_held_record(),
    ];
    all.sort_by(|a, b| a.name.cmp(&b.name));
    all
}

// ---------------------------------------------------------------------------------- C1

/// Record headers: name, value (`None`: a header without value).
type Headers<'a> = &'a [(&'a str, Option<&'a [u8]>)];

fn c01_last_well_formed_epoch_header() -> Trace {
    let mut t = trace(
        "C01-last-well-formed-epoch-header",
        "A record's epoch is its last well-formed `dkg-epoch` header. Epoch 1 is settled, epoch 2 \
         known; `cold` lives on partition 0 (another member's) in both. Records of `cold` fetched \
         from partition 3: read as epoch 1 they are delivered at once, as epoch 2 they are held \
         until partition 0 drained 2. Malformed values (not digits, 21 digits, above u64, no \
         value) are ignored; leading zeros are read; `dkg-producer` and `dkg-barrier` change \
         nothing.",
        &[COLD, HOT],
    );
    settled(&mut t, &doc(4, 1, &[(HOT, 1)], &[]), &[3]);
    t.control(&doc(4, 2, &[(HOT, 1)], &[]));
    let e = "dkg-epoch";
    let cases: [(Headers<'_>, bool); 7] = [
        (&[(e, Some(b"2")), (e, Some(b"1"))], true),
        (&[(e, Some(b"1")), (e, Some(b"x"))], true),
        (
            &[(e, Some(b"1")), (e, Some(b"000000000000000000002"))],
            true,
        ),
        (&[(e, Some(b"1")), (e, Some(b"18446744073709551616"))], true),
        (&[(e, Some(b"1")), (e, None), (e, Some(b""))], true),
        (&[(e, Some(b"1")), (e, Some(b"02"))], false),
        (
            &[
                ("dkg-barrier", Some(b"2")),
                ("dkg-producer", Some(Y.as_bytes())),
            ],
            true,
        ),
    ];
    for (offset, (headers, at_once)) in (0_i64..).zip(cases) {
        let out = t.record_h(3, offset, Some(COLD), headers);
        check(
            (delivered(out) == [(3, offset)]) == at_once,
            "C01",
            &format!("record {offset} read with the wrong epoch"),
        );
    }
    check(
        held(t.last(), 3) == 1,
        "C01",
        "the record read as epoch 2 is held",
    );
    t.progress(0, 2);
    let out = t.next();
    check(
        delivered(out) == [(3, 5)],
        "C01",
        "released when partition 0 drained 2",
    );
    t
}

// ---------------------------------------------------------------------------------- C2

/// Epochs 1 and 2 known (`hot` moves from partition 1 to 2), `owned` assigned, Y's marker of 1
/// passed, the other partitions drained 1 (no progress of 2 anywhere).
fn two_epochs(t: &mut Trace, owned: &[u32]) {
    settled(t, &doc(4, 1, &[(HOT, 1)], &[]), owned);
    t.control(&doc(4, 2, &[(HOT, 2)], &[]));
}

fn c02_lease_clamped_to_max_lease() -> Trace {
    let cfg = Config {
        max_lease_ms: 60_000,
        ..Config::default()
    };
    let mut t = Trace::new(
        "C02-lease-clamped-to-max-lease",
        "`max_lease` 60 s. Producer Z's lease claims to run for a day: read at wall clock `now`, \
         it counts as expiring at `now` + 60 s (counted as clamped). Z never writes its marker \
         of 2, so partition 2 stays at drained 1 until the clamped expiry; a renewal read 30 s \
         later is a new read and moves the clamp to 90 s. Then partition 2 drains 2 (Y's marker \
         of 2 was passed) and commits it.",
        &[HOT],
        cfg,
    );
    two_epochs(&mut t, &[2]);
    let out = t.lease(Z, 0, NOW_MS + 86_400_000, None);
    check(
        out.anomalies
            .as_ref()
            .is_some_and(|a| a.clamped_leases == 1),
        "C02",
        "a lease beyond max_lease is clamped and counted",
    );
    t.marker(Z, 1, &[0; 4]);
    t.marker(Y, 2, &[0; 4]);
    let out = t.next();
    check(announced(out).is_empty(), "C02", "Z is awaited for 2");
    t.at(30_000).tick(NOW_MS + 30_000);
    t.lease(Z, 0, NOW_MS + 86_400_000, None);
    t.at(59_999).tick(NOW_MS + 59_999);
    t.at(60_000).tick(NOW_MS + 60_000);
    let out = t.next();
    check(
        announced(out).is_empty(),
        "C02",
        "the renewal moved the clamp to 90 s",
    );
    t.at(89_999).tick(NOW_MS + 89_999);
    check(
        announced(t.next()).is_empty(),
        "C02",
        "still awaited before 90 s",
    );
    t.at(90_000).tick(NOW_MS + 90_000);
    let out = t.next();
    check(
        announced(out) == [(2, 2)],
        "C02",
        "not awaited once the clamped lease expired",
    );
    t
}

fn c02_expired_lease_not_awaited() -> Trace {
    let mut t = trace(
        "C02-expired-lease-not-awaited",
        "The member owns partitions 1 and 2; epoch 2 moves `hot` from 1 to 2. Producer Z's lease \
         expires at start + 30 s and Z never writes its marker of 2, so partition 1 cannot drain \
         2 and the record of `hot` stamped 2 on partition 2 stays held, until the wall clock \
         reaches the expiry: then both partitions drain 2 and the record is released.",
        &[HOT],
    );
    two_epochs(&mut t, &[1, 2]);
    t.lease(Z, 0, LEASE_UNTIL, None);
    t.marker(Z, 1, &[0; 4]);
    t.marker(Y, 2, &[0; 4]);
    t.record(2, 0, HOT, Some(2));
    let out = t.next();
    check(
        held(out, 2) == 1 && announced(out).is_empty(),
        "C02",
        "Z awaited for 2",
    );
    t.at(29_999).tick(LEASE_UNTIL - 1);
    check(held(t.next(), 2) == 1, "C02", "Z still awaited");
    t.at(30_000).tick(LEASE_UNTIL);
    let out = t.next();
    check(
        announced(out) == [(1, 2), (2, 2)],
        "C02",
        "Z expired: both drain 2",
    );
    check(delivered(out) == [(2, 0)], "C02", "and hot is released");
    t
}

fn c02_closed_lease_awaited_up_to_its_epoch() -> Trace {
    let mut t = trace(
        "C02-closed-lease-awaited-up-to-its-epoch",
        "Producer Z is live without a marker of 2, so partition 2 stays at drained 1. Z closes \
         cleanly at epoch 1 (its lease rewritten with `closed_at_epoch` 1): it is no longer \
         awaited for 2, and partition 2 drains 2 before the lease expires.",
        &[HOT],
    );
    two_epochs(&mut t, &[2]);
    t.lease(Z, 0, LEASE_UNTIL, None);
    t.marker(Z, 1, &[0; 4]);
    t.marker(Y, 2, &[0; 4]);
    check(announced(t.next()).is_empty(), "C02", "Z awaited for 2");
    t.lease(Z, 0, LEASE_UNTIL, Some(1));
    let out = t.next();
    check(
        announced(out) == [(2, 2)],
        "C02",
        "Z closed at 1: not awaited for 2",
    );
    t
}

fn c02_lease_tombstone_forgets_producer() -> Trace {
    let mut t = trace(
        "C02-lease-tombstone-forgets-producer",
        "Producer Z is live without a marker of 2; a tombstone of its lease makes the member \
         forget it (and its marker): partition 2 drains 2. A tombstone of Z's marker alone does \
         not end the wait.",
        &[HOT],
    );
    two_epochs(&mut t, &[2]);
    t.lease(Z, 0, LEASE_UNTIL, None);
    t.marker(Z, 1, &[0; 4]);
    t.marker(Y, 2, &[0; 4]);
    check(announced(t.next()).is_empty(), "C02", "Z awaited for 2");
    t.handoff(&format!("marker/orders/{Z}"), None);
    check(
        announced(t.next()).is_empty(),
        "C02",
        "a marker tombstone ends nothing",
    );
    t.handoff(&format!("lease2/orders/{Z}"), None);
    let out = t.next();
    check(
        announced(out) == [(2, 2)],
        "C02",
        "Z forgotten: partition 2 drains 2",
    );
    t
}

// ---------------------------------------------------------------------------------- C3

/// Epochs 1, 2 and 3 known (`hot` on partition 1, then 2), `cold` on 0 throughout.
fn three_epochs(t: &mut Trace, owned: &[u32]) {
    two_epochs(t, owned);
    t.control(&doc(4, 3, &[(HOT, 2)], &[]));
}

fn c03_latest_marker_per_producer() -> Trace {
    let mut t = trace(
        "C03-latest-marker-per-producer",
        "The member keeps Y's marker of the highest epoch: a marker of 3 ending at 2 on \
         partition 2 is kept; a later marker of 2 and a re-read of 3 with other ends are \
         ignored. Once records 0 and 1 of partition 2 are processed, Y's marker of 3 is passed \
         and partition 2 drains 3.",
        &[COLD],
    );
    three_epochs(&mut t, &[2]);
    t.marker(Y, 3, &[0, 0, 2, 0]);
    t.marker(Y, 2, &[0, 0, 0, 0]);
    check(
        announced(t.next()).is_empty(),
        "C03",
        "the marker of 2 is older than the one kept",
    );
    t.marker(Y, 3, &[0, 0, 0, 0]);
    check(
        announced(t.next()).is_empty(),
        "C03",
        "a re-read of epoch 3 is ignored",
    );
    t.record(2, 0, COLD, None);
    t.record(2, 1, COLD, None);
    let out = t.next();
    check(
        announced(out) == [(2, 3)],
        "C03",
        "the kept marker of 3 is passed",
    );
    t
}

fn c03_marker_rejects_counted() -> Trace {
    let mut t = trace(
        "C03-marker-rejects-counted",
        "Marker records that fail strict decoding (spec 9.1) are skipped and counted by reason: \
         not JSON, a member missing, a negative epoch (`malformed_json`); a producer differing \
         from the key (`key_mismatch`); epoch 0, no end, a negative end (`invalid`); ends not of \
         the topic's partition count (`partition_count`). An unknown member is ignored and the \
         marker kept; a marker of another topic is neither applied nor counted. Partition 2 \
         drains 2 only by the good marker.",
        &[COLD],
    );
    two_epochs(&mut t, &[2]);
    let key = format!("marker/orders/{Y}");
    let bad: [(&str, &str); 8] = [
        ("malformed_json", "{"),
        (
            "malformed_json",
            r#"{"producer":"PY","topic":"orders","ends":[0,0,0,0]}"#,
        ),
        (
            "malformed_json",
            r#"{"producer":"PY","topic":"orders","epoch":-2,"ends":[0,0,0,0]}"#,
        ),
        (
            "key_mismatch",
            r#"{"producer":"PZ","topic":"orders","epoch":2,"ends":[0,0,0,0]}"#,
        ),
        (
            "invalid",
            r#"{"producer":"PY","topic":"orders","epoch":0,"ends":[0,0,0,0]}"#,
        ),
        (
            "invalid",
            r#"{"producer":"PY","topic":"orders","epoch":2,"ends":[]}"#,
        ),
        (
            "invalid",
            r#"{"producer":"PY","topic":"orders","epoch":2,"ends":[0,0,-1,0]}"#,
        ),
        (
            "partition_count",
            r#"{"producer":"PY","topic":"orders","epoch":2,"ends":[0,0,0]}"#,
        ),
    ];
    for (reason, value) in bad {
        let value = value.replace("PY", Y).replace("PZ", Z);
        let out = t.handoff(&key, Some(&value));
        check(
            out.anomalies
                .as_ref()
                .is_some_and(|a| a.markers_rejected.get(reason) == Some(&1)),
            "C03",
            &format!("{value} rejected as {reason}"),
        );
    }
    check(
        announced(t.next()).is_empty(),
        "C03",
        "no rejected marker was applied",
    );
    let other = format!(r#"{{"producer":"{Y}","topic":"other","epoch":2,"ends":[0,0,0,0]}}"#);
    let out = t.handoff(&format!("marker/other/{Y}"), Some(&other));
    check(
        out.anomalies.is_none(),
        "C03",
        "another topic's marker is not counted",
    );
    check(announced(t.next()).is_empty(), "C03", "nor applied");
    let good = format!(
        r#"{{"producer":"{Y}","topic":"orders","epoch":2,"ends":[0,0,0,0],"comment":"x"}}"#
    );
    t.handoff(&key, Some(&good));
    let out = t.next();
    check(
        announced(out) == [(2, 2)],
        "C03",
        "the good marker drains 2",
    );
    t
}

fn c03_marker_applies_to_partition_assigned_later() -> Trace {
    let mut t = trace(
        "C03-marker-applies-to-partition-assigned-later",
        "Y's marker of 2 (ending at 4 on partition 3) is read while the member owns only \
         partition 2. Partition 3 is assigned later, without committed offset: the kept marker \
         applies to it, and is passed once records 0-3 of partition 3 are processed.",
        &[COLD],
    );
    two_epochs(&mut t, &[2]);
    t.marker(Y, 2, &[0, 0, 0, 4]);
    let out = t.next();
    check(announced(out) == [(2, 2)], "C03", "partition 2 drains 2");
    let out = t.assign(&[(3, None, "")]);
    check(
        announced(out) == [(3, 0)],
        "C03",
        "partition 3 starts at drained 0",
    );
    for o in 0..4 {
        t.record(3, o, COLD, None);
    }
    let out = t.next();
    check(
        announced(out) == [(3, 2)],
        "C03",
        "the kept marker is passed on partition 3",
    );
    t
}

fn c03_marker_applied_again_when_lease_read_again() -> Trace {
    let mut t = trace(
        "C03-marker-applied-again-when-lease-read-again",
        "Y's marker of 2 ends at 2 on partition 2, not reached yet. Y's lease expires (start + 30 \
         s): Y is no longer awaited and partition 2 drains 2 without it. Y renews its lease: it \
         is awaited again (drained falls to 1) and its kept marker applies again, so once records \
         0 and 1 are processed Y has passed 2 there and partition 2 drains 2 again.",
        &[COLD],
    );
    two_epochs(&mut t, &[2]);
    t.marker(Y, 2, &[0, 0, 2, 0]);
    check(announced(t.next()).is_empty(), "C03", "not reached");
    t.at(30_000).tick(LEASE_UNTIL);
    let out = t.next();
    check(
        announced(out) == [(2, 2)],
        "C03",
        "Y expired: drained 2 without it",
    );
    t.lease(Y, 0, LEASE_UNTIL + 30_000, None);
    let out = t.next();
    check(
        announced(out) == [(2, 1)],
        "C03",
        "Y awaited again: drained falls to 1",
    );
    t.record(2, 0, COLD, None);
    t.record(2, 1, COLD, None);
    let out = t.next();
    check(
        announced(out) == [(2, 2)],
        "C03",
        "the kept marker applied again is passed",
    );
    t
}

// ---------------------------------------------------------------------------------- C4

fn c04_reached_when_position_at_end() -> Trace {
    let mut t = trace(
        "C04-reached-when-position-at-end",
        "Y's marker of 2 ends at 3 on partition 2. Records 0-2 are delivered one by one; the \
         marker is reached (and passed) only when record 2, the application's, is processed by \
         its next poll: then partition 2 drains 2, the epoch hook runs, offset 3 is committed \
         and the progress announced.",
        &[COLD],
    );
    two_epochs(&mut t, &[2]);
    t.marker(Y, 2, &[0, 0, 3, 0]);
    for o in 0..3 {
        let out = t.record(2, o, COLD, None);
        check(
            announced(out).is_empty(),
            "C04",
            "not reached before position 3",
        );
    }
    let out = t.next();
    check(
        announced(out) == [(2, 2)],
        "C04",
        "reached once record 2 is processed",
    );
    check(
        commits(out).first().is_some_and(|c| c.0 == 2 && c.1 == 3),
        "C04",
        "offset 3 committed",
    );
    t
}

fn c04_committed_offset_counts_as_position() -> Trace {
    let mut t = trace(
        "C04-committed-offset-counts-as-position",
        "Partition 2 is assigned with committed offset 10 (and a previous owner's metadata: \
         drained 1). Y's marker of 2 ending at 7 there is reached at once: the committed offset \
         counts as a position, and nothing below it is unprocessed. Partition 2 drains 2 \
         without fetching anything.",
        &[COLD],
    );
    settled(&mut t, &doc(4, 1, &[(HOT, 1)], &[]), &[3]);
    t.control(&doc(4, 2, &[(HOT, 2)], &[]));
    let meta = format!(r#"{{"v":1,"d":1,"p":{{"{Y}":[1,0]}}}}"#);
    t.assign(&[(2, Some(10), &meta)]);
    t.marker(Y, 2, &[0, 0, 7, 0]);
    let out = t.next();
    check(
        announced(out).contains(&(2, 2)),
        "C04",
        "the committed offset reaches the marker",
    );
    t
}

// ---------------------------------------------------------------------------------- C5

fn c05_held_record_of_its_epoch_does_not_block() -> Trace {
    let mut t = trace(
        "C05-held-record-of-its-epoch-does-not-block",
        "`hot` moves from partition 1 to 2 at epoch 2. Its record stamped 2 at offset 0 of \
         partition 2 is held (partition 1 has not drained 2). Y's marker of 2 ends at 1 there: it \
         is passed although the held record below it is unprocessed, because that record is of \
         epoch 2, not below it. Partition 2 drains 2 and commits offset 0 (the held record).",
        &[HOT],
    );
    two_epochs(&mut t, &[2]);
    t.record(2, 0, HOT, Some(2));
    t.marker(Y, 2, &[0, 0, 1, 0]);
    let out = t.next();
    check(held(out, 2) == 1, "C05", "still held");
    check(
        announced(out) == [(2, 2)],
        "C05",
        "passed despite the held record of epoch 2",
    );
    check(
        commits(out).first().is_some_and(|c| c.1 == 0),
        "C05",
        "the commit stays below the held record",
    );
    t
}

fn c05_lower_epoch_passed_while_older_record_waits() -> Trace {
    let mut t = trace(
        "C05-lower-epoch-passed-while-older-record-waits",
        "Epochs 1-3; `hot` moves from partition 1 to 2 at epoch 2. Its record stamped 2 at offset \
         0 of partition 2 is held. Y skipped epoch 2 and writes its marker of 3, ending at 1 on \
         partition 2: the held record of epoch 2 is below it, so Y counts as having passed 2 \
         there (a marker of 3 is one of 2), not 3. Partition 2 drains 2; once partition 1 \
         drained 2 the record is released and processed, and partition 2 drains 3.",
        &[HOT],
    );
    three_epochs(&mut t, &[2]);
    t.record(2, 0, HOT, Some(2));
    t.marker(Y, 3, &[0, 0, 1, 0]);
    let out = t.next();
    check(announced(out) == [(2, 2)], "C05", "Y passed 2, not 3");
    t.progress(1, 2);
    let out = t.next();
    check(delivered(out) == [(2, 0)], "C05", "released");
    check(announced(out) == [(2, 3)], "C05", "processed: Y passed 3");
    t
}

// ---------------------------------------------------------------------------------- C6

fn c06_drained_waits_for_every_awaited_producer() -> Trace {
    let mut t = trace(
        "C06-drained-waits-for-every-awaited-producer",
        "Producers Y and Z are live. Partition 2 drains 2 only when both markers of 2 are passed \
         there; Y's alone is not enough.",
        &[COLD],
    );
    two_epochs(&mut t, &[2]);
    t.lease(Z, 0, LEASE_UNTIL, None);
    t.marker(Z, 1, &[0; 4]);
    t.marker(Y, 2, &[0; 4]);
    check(
        announced(t.next()).is_empty(),
        "C06",
        "Z's marker of 2 is missing",
    );
    t.marker(Z, 2, &[0, 0, 1, 0]);
    check(
        announced(t.next()).is_empty(),
        "C06",
        "Z's marker of 2 not reached",
    );
    t.record(2, 0, COLD, None);
    let out = t.next();
    check(announced(out) == [(2, 2)], "C06", "both passed: drained 2");
    t
}

fn c06_first_epoch_not_awaited() -> Trace {
    let mut t = trace(
        "C06-first-epoch-not-awaited",
        "Producer Z registered at epoch 2 (`first_epoch` 2): it never routed a record under an \
         earlier epoch, so it is not awaited for epochs up to 2. Partition 2 drains 2 by Y's \
         marker alone.",
        &[COLD],
    );
    two_epochs(&mut t, &[2]);
    t.lease(Z, 2, LEASE_UNTIL, None);
    t.marker(Y, 2, &[0; 4]);
    let out = t.next();
    check(announced(out) == [(2, 2)], "C06", "Z not awaited for 2");
    t
}

fn c06_drained_falls_when_a_lease_appears() -> Trace {
    let mut t = trace(
        "C06-drained-falls-when-a-lease-appears",
        "Partition 2 drained 2 by Y's marker. Then the lease of producer Z (first epoch 1, no \
         marker passed) is read: Z is awaited for 2, so partition 2's drained value falls to 1. \
         Its passed map stays; once Z's marker of 2 is passed it is 2 again.",
        &[COLD],
    );
    two_epochs(&mut t, &[2]);
    t.marker(Y, 2, &[0; 4]);
    let out = t.next();
    check(announced(out) == [(2, 2)], "C06", "drained 2");
    t.lease(Z, 1, LEASE_UNTIL, None);
    t.next();
    t.marker(Z, 2, &[0; 4]);
    let out = t.next();
    check(announced(out) == [(2, 2)], "C06", "drained 2 again");
    t
}

// ---------------------------------------------------------------------------------- C7

fn c07_hook_commit_then_announce() -> Trace {
    let mut t = trace(
        "C07-hook-commit-then-announce",
        "The member owns partition 1, `hot`'s home at epoch 1; epoch 2 moves `hot` to partition \
         2 (another member's). Y's marker of 2 ends at 2 on partition 1. When records 0 and 1 \
         are processed, partition 1 drains 2: the epoch hook runs first (`hot` moved out), then \
         the synchronous commit of offset 2 with the metadata of C7 (`d`, `p` with Y's epoch and \
         end, `n`), then the progress announcement. An explicit commit then commits every owned \
         partition's offset with its metadata (`u` lists the held record).",
        &[HOT, COLD],
    );
    settled(&mut t, &doc(4, 1, &[(HOT, 1)], &[]), &[1, 3]);
    t.control(&doc(4, 2, &[(HOT, 2), (COLD, 3)], &[]));
    t.marker(Y, 2, &[0, 2, 0, 5]);
    t.record(1, 0, HOT, None);
    t.record(1, 1, HOT, None);
    let out = t.next();
    let order: Vec<&str> = out
        .effects
        .iter()
        .map(|e| match e {
            Effect::Hook(_) => "hook",
            Effect::Commit(_) => "commit",
            Effect::Announce { .. } => "announce",
            Effect::Pause(_) | Effect::Resume(_) => "flow",
        })
        .collect();
    check(
        order == ["hook", "commit", "announce"],
        "C07",
        "hook, commit, announce",
    );
    check(announced(out) == [(1, 2)], "C07", "partition 1 drained 2");
    t.record(3, 0, COLD, Some(2));
    t.record(3, 1, HOT, None);
    let out = t.commit();
    check(commits(out).len() == 2, "C07", "both partitions committed");
    t
}

fn c07_metadata_over_limit_leaves_out_window() -> Trace {
    let cfg = Config {
        max_metadata_bytes: 80,
        ..Config::default()
    };
    let mut t = Trace::new(
        "C07-metadata-over-limit-leaves-out-window",
        "`max_metadata_bytes` 80. Partition 2 holds records of `hot` stamped 2 at offsets 0-5 \
         and drains 2: the metadata with the window (`n`, `u`) would exceed the limit, so it is \
         committed without them.",
        &[HOT],
        cfg,
    );
    two_epochs(&mut t, &[2]);
    for o in 0..6 {
        t.record(2, o, HOT, Some(2));
    }
    t.marker(Y, 2, &[0, 0, 6, 0]);
    let out = t.next();
    check(
        commits(out)
            .first()
            .is_some_and(|c| !c.2.contains("\"n\"") && !c.2.contains("\"u\"")),
        "C07",
        "metadata without the window",
    );
    t
}

// ---------------------------------------------------------------------------------- C8

fn c08_held_until_old_partition_drained() -> Trace {
    let mut t = trace(
        "C08-held-until-old-partition-drained",
        "Epoch 2 moves `hot` from partition 1 (another member's) to partition 2 (this member's). \
         Its record stamped 2 on partition 2 is held until partition 1 has drained 2: partition \
         2 draining 2 and partition 3 (no home of `hot`) draining 2 do not release it, partition \
         1's announcement does. A record of `cold`, whose only home is partition 0 (this \
         member's), stamped 2 and fetched from partition 0, is delivered at once.",
        &[HOT, COLD],
    );
    two_epochs(&mut t, &[0, 2]);
    let out = t.record(2, 0, HOT, Some(2));
    check(
        delivered(out).is_empty() && held(out, 2) == 1,
        "C08",
        "held while partition 1 drained 1",
    );
    let out = t.record(0, 0, COLD, Some(2));
    check(
        delivered(out) == [(0, 0)],
        "C08",
        "no other home: delivered at once",
    );
    t.marker(Y, 2, &[1, 0, 0, 0]);
    let out = t.next();
    check(
        held(out, 2) == 1,
        "C08",
        "its own partition draining 2 does not release it",
    );
    let out = t.progress(3, 2);
    check(held(out, 2) == 1, "C08", "partition 3 is no home of hot");
    t.progress(1, 2);
    let out = t.next();
    check(
        delivered(out) == [(2, 0)],
        "C08",
        "released once partition 1 drained 2",
    );
    t
}

fn c08_unknown_assignment_counts_every_partition() -> Trace {
    let mut t = trace(
        "C08-unknown-assignment-counts-every-partition",
        "The member knows epochs 1 and 3, not 2 (its document was never read). A record of \
         `hot` stamped 3 on partition 2 may have had any home under epoch 2, so it waits for \
         every other partition to drain 3: partition 1 (its epoch-1 home) is not enough.",
        &[HOT],
    );
    settled(&mut t, &doc(4, 1, &[(HOT, 1)], &[]), &[2]);
    t.control(&doc(4, 3, &[(HOT, 2)], &[]));
    t.record(2, 0, HOT, Some(3));
    t.progress(1, 3);
    check(
        held(t.next(), 2) == 1,
        "C08",
        "epoch 2 unknown: every partition is a home",
    );
    t.progress(0, 3);
    check(held(t.next(), 2) == 1, "C08", "partition 3 still at 1");
    t.progress(3, 3);
    let out = t.next();
    check(
        delivered(out) == [(2, 0)],
        "C08",
        "released once every other partition drained 3",
    );
    t
}

fn c08_epochs_below_settled_not_waited_for() -> Trace {
    let mut t = trace(
        "C08-epochs-below-settled-not-waited-for",
        "`hot` lives on partition 1 in epoch 1, on 3 in epoch 2, on 2 (this member's) in epoch 3. \
         Every partition has drained 2, so the settled epoch `S` is 2. A record of `hot` stamped 3 \
         on partition 2 waits for the homes of epochs `S`..2 only: partition 3. Partition 1 \
         (epoch 1, below `S`) drained 2 but not 3, and is not waited for.",
        &[HOT],
    );
    settled(&mut t, &doc(4, 1, &[(HOT, 1)], &[]), &[2]);
    t.control(&doc(4, 2, &[(HOT, 3)], &[]));
    t.marker(Y, 2, &[0; 4]);
    t.next();
    for p in [0, 1, 3] {
        t.progress(p, 2);
    }
    t.control(&doc(4, 3, &[(HOT, 2)], &[]));
    t.record(2, 0, HOT, Some(3));
    t.progress(3, 3);
    let out = t.next();
    check(
        delivered(out) == [(2, 0)],
        "C08",
        "released by partition 3 alone",
    );
    t
}

// ---------------------------------------------------------------------------------- C9

fn c09_held_records_released_in_key_order() -> Trace {
    let mut t = trace(
        "C09-held-records-released-in-key-order",
        "Epochs 1-3, `hot` on partition 1 then 2. On partition 2: `hot` stamped 2 at offsets 0 \
         and 1, stamped 3 at offset 2 (another producer's, already in epoch 3), stamped 2 at \
         offset 3. All are held. When partition 1 drains 2, offsets 0, 1 and 3 are released in \
         order: the held record of epoch 3 does not block the later one of epoch 2. Offset 2 \
         follows when partition 1 drains 3.",
        &[HOT],
    );
    three_epochs(&mut t, &[2]);
    t.record(2, 0, HOT, Some(2));
    t.record(2, 1, HOT, Some(2));
    t.record(2, 2, HOT, Some(3));
    let out = t.record(2, 3, HOT, Some(2));
    check(held(out, 2) == 4, "C09", "all held");
    t.progress(1, 2);
    let out = t.next();
    check(
        delivered(out) == [(2, 0), (2, 1), (2, 3)],
        "C09",
        "epoch 2 in order, past epoch 3",
    );
    t.progress(1, 3);
    let out = t.next();
    check(
        delivered(out) == [(2, 2)],
        "C09",
        "epoch 3 when partition 1 drained 3",
    );
    t
}

// ---------------------------------------------------------------------------------- C10

fn c10_unstamped_and_keyless() -> Trace {
    let mut t = trace(
        "C10-unstamped-and-keyless",
        "Partition 2 has drained only 1 (`H` = 1) and holds `hot` stamped 2. A keyless record \
         (even with a `dkg-epoch` header) is delivered at once. An unstamped `hot` record is \
         delivered at once too: its producer's earlier held records of `hot` would be of epochs \
         at most 1, so the held one of epoch 2 is another producer's.",
        &[HOT],
    );
    two_epochs(&mut t, &[2]);
    t.record(2, 0, HOT, Some(2));
    let out = t.record_h(2, 1, None, &[("dkg-epoch", Some(b"2"))]);
    check(delivered(out) == [(2, 1)], "C10", "keyless: at once");
    let out = t.record(2, 2, HOT, None);
    check(
        delivered(out) == [(2, 2)],
        "C10",
        "unstamped, held epochs above H: at once",
    );
    t
}

fn c10_unstamped_queues_behind_held_records() -> Trace {
    let mut t = trace(
        "C10-unstamped-queues-behind-held-records",
        "Partition 2 drained 2 (`H` = 2) and holds `hot` stamped 2 (partition 1 has not drained \
         2). An unstamped `hot` record may be the same producer's next one: it is held behind it, \
         counted as a record of epoch 2. An unstamped `cold` record (nothing held) is delivered \
         at once. When partition 1 drains 2 both `hot` records are released, in order.",
        &[HOT, COLD],
    );
    two_epochs(&mut t, &[2]);
    t.record(2, 0, HOT, Some(2));
    t.marker(Y, 2, &[0, 0, 1, 0]);
    let out = t.next();
    check(announced(out) == [(2, 2)], "C10", "H = 2");
    let out = t.record(2, 1, HOT, None);
    check(held(out, 2) == 2, "C10", "held behind the stamped record");
    let out = t.record(2, 2, COLD, None);
    check(delivered(out) == [(2, 2)], "C10", "cold at once");
    t.progress(1, 2);
    let out = t.next();
    check(
        delivered(out) == [(2, 0), (2, 1)],
        "C10",
        "released in order",
    );
    t
}

// ---------------------------------------------------------------------------------- C11, C12

fn c11_skip_window() -> Trace {
    let mut t = trace(
        "C11-skip-window",
        "Partition 2 is taken with committed offset 5 and metadata `n` 9, `u` [1, 3]: the \
         previous owner processed 5 and 7, not 6 and 8. Records 5-10 are fetched: 5 and 7 are \
         skipped, the others delivered. Partition 3 is taken with the same metadata but no \
         committed offset: the window is not used, nothing is skipped.",
        &[COLD],
    );
    settled(&mut t, &doc(4, 1, &[(HOT, 1)], &[]), &[0]);
    let meta = format!(r#"{{"v":1,"d":1,"p":{{"{Y}":[1,0]}},"n":9,"u":[1,3]}}"#);
    t.assign(&[(2, Some(5), &meta), (3, None, &meta)]);
    let mut skipped = Vec::new();
    for o in 5..11 {
        let out = t.record(2, o, COLD, None);
        skipped.extend(out.skipped.iter().map(|s| s[1]));
    }
    check(skipped == [5, 7], "C11", "5 and 7 skipped");
    for o in 5..8 {
        let out = t.record(3, o, COLD, None);
        check(
            delivered(out) == [(3, o)],
            "C11",
            "no committed offset: no window",
        );
    }
    t
}

fn c11_revoked_then_taken_again() -> Trace {
    let mut t = trace(
        "C11-revoked-then-taken-again",
        "The member fetches records 0-5 of partition 2: `hot` stamped 2 at 1, 3 and 5 is held \
         (partition 1 has not drained 2), `cold` at 0, 2 and 4 is delivered (and processed by \
         the next poll). Partition 2 is revoked: the final commit is offset 1 with the window \
         `n` 6, `u` [0, 2, 4] (offsets 1, 3, 5). Taken again with that commit, the member skips \
         what was processed (2, 4) and holds 1, 3 and 5 again: nothing processed is delivered \
         twice, nothing held is lost.",
        &[HOT, COLD],
    );
    two_epochs(&mut t, &[2]);
    for o in 0..6 {
        let epoch = (o % 2 == 1).then_some(2);
        let key = if o % 2 == 1 { HOT } else { COLD };
        t.record(2, o, key, epoch);
    }
    let out = t.revoke(&[2]);
    let committed = commits(out);
    check(
        committed.len() == 1
            && committed[0].1 == 1
            && committed[0].2.contains(r#""n":6,"u":[0,2,4]"#),
        "C11",
        "final commit below the held records, with the window",
    );
    let meta = committed[0].2.clone();
    t.assign(&[(2, Some(1), &meta)]);
    let (mut skipped, mut again) = (Vec::new(), Vec::new());
    for o in 1..6 {
        let epoch = (o % 2 == 1).then_some(2);
        let key = if o % 2 == 1 { HOT } else { COLD };
        let out = t.record(2, o, key, epoch);
        again.extend(delivered(out));
        skipped.extend(out.skipped.iter().map(|s| s[1]));
    }
    check(
        skipped == [2, 4],
        "C11",
        "the processed records are skipped",
    );
    check(again.is_empty(), "C11", "nothing delivered twice");
    check(
        held(t.last(), 2) == 3,
        "C11",
        "the held records are held again",
    );
    t.progress(1, 2);
    let out = t.next();
    check(
        delivered(out) == [(2, 1), (2, 3), (2, 5)],
        "C11",
        "and released",
    );
    t
}

fn c12_skip_passed() -> Trace {
    let mut t = trace(
        "C12-skip-passed",
        "Partition 2 is taken with committed offset 3 and metadata whose `p` says Y's marker of 2 \
         ending at 6 was passed (no window). Fetched: offset 3 stamped 1 (below 6, epoch below \
         2: skipped), 4 unstamped (never skipped: delivered), 5 stamped 2 (not below epoch 2: \
         not skipped; C8 then holds it, partition 0 has not drained 2), 6 stamped 1 (not below 6: not skipped).",
        &[COLD],
    );
    settled(&mut t, &doc(4, 1, &[(HOT, 1)], &[]), &[0]);
    t.control(&doc(4, 2, &[(HOT, 2)], &[]));
    let meta = format!(r#"{{"v":1,"d":2,"p":{{"{Y}":[2,6]}}}}"#);
    t.assign(&[(2, Some(3), &meta)]);
    let out = t.record(2, 3, COLD, Some(1));
    check(out.skipped == [[2, 3]], "C12", "stamped 1 below 6: skipped");
    let out = t.record(2, 4, COLD, None);
    check(
        delivered(out) == [(2, 4)],
        "C12",
        "unstamped: never skipped",
    );
    let out = t.record(2, 5, COLD, Some(2));
    check(out.skipped.is_empty(), "C12", "epoch 2 not skipped");
    let out = t.record(2, 6, COLD, Some(1));
    check(out.skipped.is_empty(), "C12", "offset 6 not skipped");
    t
}

// ---------------------------------------------------------------------------------- C13

fn c13_pause_and_resume_when_halved() -> Trace {
    let cfg = Config {
        max_held: 2,
        ..Config::default()
    };
    let mut t = Trace::new(
        "C13-pause-and-resume-when-halved",
        "`max_held` 2. Partition 2 holds three records of `hot` stamped 2: flow control pauses \
         it. When partition 1 drains 2 they are released; the next check resumes it.",
        &[HOT],
        cfg,
    );
    two_epochs(&mut t, &[2]);
    for o in 0..3 {
        t.record(2, o, HOT, Some(2));
    }
    let out = t.at(100).tick(NOW_MS + 100);
    check(
        out.effects == [Effect::Pause(2)],
        "C13",
        "paused over max_held",
    );
    t.progress(1, 2);
    let out = t.next();
    check(delivered(out).len() == 3, "C13", "released");
    let out = t.at(200).tick(NOW_MS + 200);
    check(
        out.effects == [Effect::Resume(2)],
        "C13",
        "resumed once halved",
    );
    t
}

fn c13_stall_timeout_resumes() -> Trace {
    let cfg = Config {
        max_held: 2,
        ..Config::default()
    };
    let mut t = Trace::new(
        "C13-stall-timeout-resumes",
        "`max_held` 2, `stall_timeout` 5 s. Partition 2 holds three records and is paused at \
         t = 1 s; nothing is released, so at t = 6 s it is resumed anyway, and a fourth held \
         record does not pause it again until the buffer has halved.",
        &[HOT],
        cfg,
    );
    two_epochs(&mut t, &[2]);
    for o in 0..3 {
        t.record(2, o, HOT, Some(2));
    }
    let out = t.at(1000).tick(NOW_MS + 1000);
    check(out.effects == [Effect::Pause(2)], "C13", "paused");
    let out = t.at(5999).tick(NOW_MS + 5999);
    check(
        out.effects.is_empty(),
        "C13",
        "still paused before the stall timeout",
    );
    let out = t.at(6000).tick(NOW_MS + 6000);
    check(
        out.effects == [Effect::Resume(2)],
        "C13",
        "resumed by the stall timeout",
    );
    t.record(2, 3, HOT, Some(2));
    let out = t.at(7000).tick(NOW_MS + 7000);
    check(
        out.effects.is_empty(),
        "C13",
        "not paused again before halving",
    );
    t
}

fn c13_resumed_at_half_of_max_held() -> Trace {
    let cfg = Config {
        max_held: 4,
        ..Config::default()
    };
    let mut t = Trace::new(
        "C13-resumed-at-half-of-max-held",
        "`max_held` 4. Partition 2 holds 6 records stamped 2 before flow control runs: 2 of `a` \
         (epoch-1 home partition 1), 1 of `b` (home 0), 3 of `c` (home 3); it is paused. As the \
         old homes drain 2 one by one the buffer falls to 4, then 3: still paused (above \
         `max_held` / 2 = 2); at 0 it is resumed.",
        &[b"a", b"b", b"c"],
        cfg,
    );
    settled(&mut t, &doc(4, 1, &[(b"a", 1), (b"c", 3)], &[]), &[2]);
    t.control(&doc(4, 2, &[(b"a", 2), (b"b", 2), (b"c", 2)], &[]));
    let keys: [&[u8]; 6] = [b"a", b"b", b"c", b"a", b"c", b"c"];
    for (o, k) in (0_i64..).zip(keys) {
        t.record(2, o, k, Some(2));
    }
    let out = t.at(100).tick(NOW_MS + 100);
    check(out.effects == [Effect::Pause(2)], "C13", "paused at 6");
    for (i, p) in [1, 0, 3].into_iter().enumerate() {
        t.progress(p, 2);
        t.next();
        let out = t
            .at(200 + 100 * i as u64)
            .tick(NOW_MS + 200 + 100 * i as u64);
        let resumed = out.effects == [Effect::Resume(2)];
        check(
            resumed == (p == 3),
            "C13",
            "resumed only at most max_held / 2",
        );
    }
    t
}

// ---------------------------------------------------------------------------------- C14-C18

fn c14_split_label_of_unstamped_records() -> Trace {
    let mut t = trace(
        "C14-split-label-of-unstamped-records",
        "Epoch 1 splits `hot` over partitions 2 and 3; epoch 2 makes it whole on 2. On partition \
         2 (drained 1) an unstamped `hot` record is of epoch 1 or 2, the two disagree: it counts \
         as split (label 2 parts) and, its split epoch 1 settled, is delivered at once; on \
         partition 3 likewise. Once partition 2 drained 2 (Y's marker passed there), an \
         unstamped `hot` record on it is of epoch 2 or 3: whole (no label).",
        &[HOT],
    );
    settled(&mut t, &doc(4, 1, &[], &[(HOT, &[2, 3])]), &[2, 3]);
    t.control(&doc(4, 2, &[(HOT, 2)], &[]));
    let out = t.record(2, 0, HOT, None);
    check(
        out.delivered == [vec![2, 0, 2]],
        "C14",
        "split label on partition 2",
    );
    let out = t.record(3, 0, HOT, None);
    check(
        out.delivered == [vec![3, 0, 2]],
        "C14",
        "split label on partition 3",
    );
    t.marker(Y, 2, &[0, 0, 1, 0]);
    let out = t.next();
    check(
        announced(out).contains(&(2, 2)),
        "C14",
        "partition 2 drained 2",
    );
    let out = t.record(2, 1, HOT, None);
    check(out.delivered == [vec![2, 1]], "C14", "whole once drained 2");
    t
}

fn c15_whole_to_split_waits_for_old_home() -> Trace {
    let mut t = trace(
        "C15-whole-to-split-waits-for-old-home",
        "Epoch 1 places `hot` whole on partition 1 (another member's); epoch 2 splits it over 2 \
         and 3 (this member's): the split hook runs when epoch 2 is read. An unstamped `hot` \
         record on partition 2 is split (split epoch 2) and held until partition 1 drained 2, \
         then delivered with its label.",
        &[HOT],
    );
    settled(&mut t, &doc(4, 1, &[(HOT, 1)], &[]), &[2, 3]);
    let out = t.control(&doc(4, 2, &[], &[(HOT, &[2, 3])]));
    check(
        !out.effects.is_empty(),
        "C18",
        "split hook when the epoch is read",
    );
    let out = t.record(2, 0, HOT, None);
    check(held(out, 2) == 1, "C15", "held while partition 1 drained 1");
    t.progress(1, 2);
    let out = t.next();
    check(
        out.delivered == [vec![2, 0, 2]],
        "C15",
        "released, labelled split",
    );
    t
}

fn c15_split_record_that_may_be_older_blocks_marker() -> Trace {
    let mut t = trace(
        "C15-split-record-that-may-be-older-blocks-marker",
        "Epochs: 1 `hot` whole on 1, 2 whole on 2, 3 split over 2 and 3. Partition 2 (this \
         member's) drained 2, partition 1 only 1. An unstamped `hot` record there is of epoch 2 or 3: split epoch 3, \
         held until partition 1 drained 3. Epoch 2 placed `hot` on partition 2 too, so while it \
         waits it counts as a record of epoch 2: Y's marker of 3 ending above it is passed only \
         as 2, and partition 2 does not drain 3 until the record is released and processed.",
        &[HOT],
    );
    three_split(&mut t);
    let out = t.record(2, 0, HOT, None);
    check(held(out, 2) == 1, "C15", "held");
    t.marker(Y, 3, &[0, 0, 1, 0]);
    let out = t.next();
    check(announced(out).is_empty(), "C15", "partition 2 stays at 2");
    t.progress(1, 3);
    let out = t.next();
    check(out.delivered == [vec![2, 0, 2]], "C15", "released");
    check(
        announced(out) == [(2, 3)],
        "C15",
        "drained 3 once processed",
    );
    t
}

/// Epochs 1 (`hot` whole on 1), 2 (whole on 2) and 3 (split over 2 and 3); this member owns
/// partition 2, drained 2 by Y's marker; partitions 0 and 3 drained 2, partition 1 (`hot`'s
/// epoch-1 home) only 1: settled 1.
fn three_split(t: &mut Trace) {
    two_epochs(t, &[2]);
    t.marker(Y, 2, &[0; 4]);
    t.next();
    for p in [0, 3] {
        t.progress(p, 2);
    }
    t.control(&doc(4, 3, &[], &[(HOT, &[2, 3])]));
}

fn c16_split_to_whole_waits_for_every_part() -> Trace {
    let mut t = trace(
        "C16-split-to-whole-waits-for-every-part",
        "Epoch 1 splits `hot` over partitions 2 and 3 (another member's); epoch 2 makes it whole \
         on 0 (this member's). A record of `hot` stamped 2 on partition 0 waits for both parts \
         to drain 2.",
        &[HOT],
    );
    settled(&mut t, &doc(4, 1, &[], &[(HOT, &[2, 3])]), &[0]);
    t.control(&doc(4, 2, &[(HOT, 0)], &[]));
    t.record(0, 0, HOT, Some(2));
    t.progress(2, 2);
    check(
        held(t.next(), 0) == 1,
        "C16",
        "one part drained is not enough",
    );
    t.progress(3, 2);
    let out = t.next();
    check(
        delivered(out) == [(0, 0)],
        "C16",
        "released when both parts drained 2",
    );
    t
}

fn c17_between_two_splits_nothing_waits() -> Trace {
    let mut t = trace(
        "C17-between-two-splits-nothing-waits",
        "Epoch 1 splits `hot` over partitions 2 and 3, epoch 2 over 1 and 2 (split differently: \
         the split hook runs). An unstamped `hot` record on partition 1 (this member's, drained \
         1) is split in epoch 2 and has no whole home to wait for: delivered at once.",
        &[HOT],
    );
    settled(&mut t, &doc(4, 1, &[], &[(HOT, &[2, 3])]), &[1]);
    t.control(&doc(4, 2, &[], &[(HOT, &[1, 2])]));
    let out = t.record(1, 0, HOT, None);
    check(
        out.delivered == [vec![1, 0, 2]],
        "C17",
        "delivered at once, split",
    );
    t
}

fn c18_unplaced_record_whole_and_split_hooks() -> Trace {
    let mut t = trace(
        "C18-unplaced-record-whole-and-split-hooks",
        "The first epoch the member learns splits `hot` over 2 and 3: the split hook runs at \
         once. An unstamped `hot` record on partition 0, where no known epoch places it, is \
         delivered at once, labelled whole. Epoch 2 makes `hot` whole on 3: the hook runs once \
         (whole again, partition 3); epoch 3, identical, runs no hook.",
        &[HOT],
    );
    let out = t.control(&doc(4, 1, &[], &[(HOT, &[2, 3])]));
    check(out.effects.len() == 1, "C18", "split hook at start");
    t.lease(Y, 0, LEASE_UNTIL, None);
    t.assign(&[(0, None, ""), (2, None, "")]);
    t.marker(Y, 1, &[0; 4]);
    t.next();
    let out = t.record(0, 0, HOT, None);
    check(
        out.delivered == [vec![0, 0]],
        "C18",
        "unplaced: whole, at once",
    );
    let out = t.control(&doc(4, 2, &[(HOT, 3)], &[]));
    check(out.effects.len() == 1, "C18", "whole again: one hook");
    let out = t.control(&doc(4, 3, &[(HOT, 3)], &[]));
    check(out.effects.is_empty(), "C18", "no transition: no hook");
    t
}

// ---------------------------------------------------------------------------------- C19

fn c19_unknown_epoch_released_after_wait() -> Trace {
    let mut t = trace(
        "C19-unknown-epoch-released-after-wait",
        "The member knows epochs 1 and 2 (settled 2). A record of `hot` stamped 5 arrives at \
         t = 1 s: held. A later `hot` record stamped 2 is not queued behind it (held records of \
         unknown epochs are left out of C9). At t = 11 s (`unknown_epoch_wait` 10 s) epoch 5 is \
         still unknown: the record is released and counted.",
        &[HOT],
    );
    two_epochs(&mut t, &[2]);
    t.marker(Y, 2, &[0; 4]);
    t.next();
    for p in [0, 1, 3] {
        t.progress(p, 2);
    }
    let out = t.at(1000).record(2, 0, HOT, Some(5));
    check(held(out, 2) == 1, "C19", "held");
    let out = t.record(2, 1, HOT, Some(2));
    check(
        delivered(out) == [(2, 1)],
        "C19",
        "not behind the unknown epoch",
    );
    let out = t.at(10_999).tick(NOW_MS + 10_999);
    check(held(out, 2) == 1, "C19", "held before the bound");
    let out = t.at(11_000).tick(NOW_MS + 11_000);
    check(
        out.anomalies.as_ref().is_some_and(|a| a.unknown_epoch == 1),
        "C19",
        "released and counted",
    );
    let out = t.next();
    check(delivered(out) == [(2, 0)], "C19", "delivered");
    t
}

fn c19_unknown_epoch_becomes_known() -> Trace {
    let mut t = trace(
        "C19-unknown-epoch-becomes-known",
        "A record of `hot` stamped 3 arrives while the member knows epochs 1 and 2: held. Epoch 3 \
         is read at t = 5 s (`hot` stays on 2): C8 applies, the record waits for partition 1 to \
         drain 3, past the 10 s bound, and nothing is counted.",
        &[HOT],
    );
    two_epochs(&mut t, &[2]);
    t.record(2, 0, HOT, Some(3));
    t.at(5000).control(&doc(4, 3, &[(HOT, 2)], &[]));
    let out = t.at(20_000).tick(NOW_MS + 20_000);
    check(
        held(out, 2) == 1 && out.anomalies.is_none(),
        "C19",
        "held by C8, not counted",
    );
    t.progress(1, 3);
    let out = t.next();
    check(
        delivered(out) == [(2, 0)],
        "C19",
        "released when partition 1 drained 3",
    );
    t
}

fn c19_unknown_epoch_waits_behind_earlier_held_record() -> Trace {
    let mut t = trace(
        "C19-unknown-epoch-waits-behind-earlier-held-record",
        "`hot` moves from partition 1 to 2 at epoch 2. On partition 2, `hot` stamped 2 (offset 0) \
         is held for partition 1, then `hot` stamped 5, an epoch never learnt (offset 1), is held \
         too. At t = 10 s its bound is over, but it is released only after the earlier held \
         record of its key (C9): both come out, in order, when partition 1 drains 2, and the \
         unknown epoch is counted then.",
        &[HOT],
    );
    two_epochs(&mut t, &[2]);
    t.record(2, 0, HOT, Some(2));
    let out = t.record(2, 1, HOT, Some(5));
    check(held(out, 2) == 2, "C19", "both held");
    let out = t.at(10_000).tick(NOW_MS + 10_000);
    check(
        held(out, 2) == 2 && out.anomalies.is_none(),
        "C19",
        "behind the earlier record of its key",
    );
    let out = t.at(12_000).progress(1, 2);
    check(
        out.anomalies.as_ref().is_some_and(|a| a.unknown_epoch == 1),
        "C19",
        "counted when released",
    );
    let out = t.next();
    check(delivered(out) == [(2, 0), (2, 1)], "C19", "in order");
    t
}
