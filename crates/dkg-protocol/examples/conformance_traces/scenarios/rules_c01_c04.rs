//! The scenarios of rules C1-C4: epoch headers, leases, markers, positions.

use super::*;

// ---------------------------------------------------------------------------------- C1

pub(super) fn c01_last_well_formed_epoch_header() -> Trace {
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
        C01.check(
            (delivered(out) == [(3, offset)]) == at_once,
            &format!("record {offset} read with the wrong epoch"),
        );
    }
    C01.check(held(t.last(), 3) == 1, "the record read as epoch 2 is held");
    t.progress(0, 2);
    let out = t.next();
    C01.check(
        delivered(out) == [(3, 5)],
        "released when partition 0 drained 2",
    );
    t
}

// ---------------------------------------------------------------------------------- C2

pub(super) fn c02_lease_clamped_to_max_lease() -> Trace {
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
    C02.check(
        out.anomalies
            .as_ref()
            .is_some_and(|a| a.clamped_leases == 1),
        "a lease beyond max_lease is clamped and counted",
    );
    t.marker(Z, 1, &[0; 4]);
    t.marker(Y, 2, &[0; 4]);
    let out = t.next();
    C02.check(announced(out).is_empty(), "Z is awaited for 2");
    t.at(30_000).tick(NOW_MS + 30_000);
    t.lease(Z, 0, NOW_MS + 86_400_000, None);
    t.at(59_999).tick(NOW_MS + 59_999);
    t.at(60_000).tick(NOW_MS + 60_000);
    let out = t.next();
    C02.check(
        announced(out).is_empty(),
        "the renewal moved the clamp to 90 s",
    );
    t.at(89_999).tick(NOW_MS + 89_999);
    C02.check(announced(t.next()).is_empty(), "still awaited before 90 s");
    t.at(90_000).tick(NOW_MS + 90_000);
    let out = t.next();
    C02.check(
        announced(out) == [(2, 2)],
        "not awaited once the clamped lease expired",
    );
    t
}

pub(super) fn c02_expired_lease_not_awaited() -> Trace {
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
    C02.check(
        held(out, 2) == 1 && announced(out).is_empty(),
        "Z awaited for 2",
    );
    t.at(29_999).tick(LEASE_UNTIL - 1);
    C02.check(held(t.next(), 2) == 1, "Z still awaited");
    t.at(30_000).tick(LEASE_UNTIL);
    let out = t.next();
    C02.check(
        announced(out) == [(1, 2), (2, 2)],
        "Z expired: both drain 2",
    );
    C02.check(delivered(out) == [(2, 0)], "and hot is released");
    t
}

pub(super) fn c02_closed_lease_awaited_after_expiry() -> Trace {
    let mut t = trace(
        "C02-closed-lease-awaited-after-expiry",
        "The member owns partitions 1 and 2; epoch 2 moves `hot` from 1 to 2. Producer Z's \
         marker of 2 ends at 1 on partition 1, whose record 0 is not fetched yet; Z closes \
         cleanly at epoch 2 (its lease rewritten with `closed_at_epoch` 2). A record of `hot` \
         stamped 2 on partition 2 is held. The lease expires (start + 30 s), and a minute \
         later still partition 1 has not drained 2: a closed lease stays awaited up to its \
         closing epoch whatever its expiry says (its markers exist). Once record 0 of \
         partition 1 is fetched and processed, Z's marker is passed: partition 1 drains 2 and \
         `hot` is released on partition 2, after its older record.",
        &[HOT],
    );
    two_epochs(&mut t, &[1, 2]);
    t.lease(Z, 0, LEASE_UNTIL, None);
    t.marker(Z, 2, &[0, 1, 0, 0]);
    t.marker(Y, 2, &[0; 4]);
    t.lease(Z, 0, LEASE_UNTIL, Some(2));
    t.record(2, 0, HOT, Some(2));
    let out = t.next();
    C02.check(
        held(out, 2) == 1 && !announced(out).contains(&(1, 2)),
        "Z awaited for 2 on partition 1",
    );
    t.at(30_000).tick(LEASE_UNTIL);
    let out = t.next();
    C02.check(
        held(out, 2) == 1 && !announced(out).contains(&(1, 2)),
        "Z's lease expired, closed at 2: still awaited for 2",
    );
    t.at(90_000).tick(LEASE_UNTIL + 60_000);
    let out = t.next();
    C02.check(
        held(out, 2) == 1 && !announced(out).contains(&(1, 2)),
        "still awaited a minute later",
    );
    let out = t.record(1, 0, HOT, Some(1));
    C02.check(
        delivered(out) == [(1, 0)],
        "the older record of hot is delivered",
    );
    let out = t.next();
    C02.check(
        announced(out).contains(&(1, 2)),
        "Z's marker passed: partition 1 drains 2",
    );
    C02.check(delivered(out) == [(2, 0)], "and hot is released");
    t
}

pub(super) fn c02_closed_lease_awaited_up_to_its_epoch() -> Trace {
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
    C02.check(announced(t.next()).is_empty(), "Z awaited for 2");
    t.lease(Z, 0, LEASE_UNTIL, Some(1));
    let out = t.next();
    C02.check(
        announced(out) == [(2, 2)],
        "Z closed at 1: not awaited for 2",
    );
    t
}

pub(super) fn c02_lease_tombstone_forgets_producer() -> Trace {
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
    C02.check(announced(t.next()).is_empty(), "Z awaited for 2");
    t.handoff(&format!("marker/orders/{Z}"), None);
    C02.check(
        announced(t.next()).is_empty(),
        "a marker tombstone ends nothing",
    );
    t.handoff(&format!("lease2/orders/{Z}"), None);
    let out = t.next();
    C02.check(
        announced(out) == [(2, 2)],
        "Z forgotten: partition 2 drains 2",
    );
    t
}

// ---------------------------------------------------------------------------------- C3

pub(super) fn c03_latest_marker_per_producer() -> Trace {
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
    C03.check(
        announced(t.next()).is_empty(),
        "the marker of 2 is older than the one kept",
    );
    t.marker(Y, 3, &[0, 0, 0, 0]);
    C03.check(
        announced(t.next()).is_empty(),
        "a re-read of epoch 3 is ignored",
    );
    t.record(2, 0, COLD, None);
    t.record(2, 1, COLD, None);
    let out = t.next();
    C03.check(announced(out) == [(2, 3)], "the kept marker of 3 is passed");
    t
}

pub(super) fn c03_marker_rejects_counted() -> Trace {
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
        C03.check(
            out.anomalies
                .as_ref()
                .is_some_and(|a| a.markers_rejected.get(reason) == Some(&1)),
            &format!("{value} rejected as {reason}"),
        );
    }
    C03.check(
        announced(t.next()).is_empty(),
        "no rejected marker was applied",
    );
    let other = format!(r#"{{"producer":"{Y}","topic":"other","epoch":2,"ends":[0,0,0,0]}}"#);
    let out = t.handoff(&format!("marker/other/{Y}"), Some(&other));
    C03.check(
        out.anomalies.is_none(),
        "another topic's marker is not counted",
    );
    C03.check(announced(t.next()).is_empty(), "nor applied");
    let good = format!(
        r#"{{"producer":"{Y}","topic":"orders","epoch":2,"ends":[0,0,0,0],"comment":"x"}}"#
    );
    t.handoff(&key, Some(&good));
    let out = t.next();
    C03.check(announced(out) == [(2, 2)], "the good marker drains 2");
    t
}

pub(super) fn c03_marker_applies_to_partition_assigned_later() -> Trace {
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
    C03.check(announced(out) == [(2, 2)], "partition 2 drains 2");
    let out = t.assign(&[(3, None, "")]);
    C03.check(
        announced(out) == [(3, 0)],
        "partition 3 starts at drained 0",
    );
    for o in 0..4 {
        t.record(3, o, COLD, None);
    }
    let out = t.next();
    C03.check(
        announced(out) == [(3, 2)],
        "the kept marker is passed on partition 3",
    );
    t
}

pub(super) fn c03_marker_applied_again_when_lease_read_again() -> Trace {
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
    C03.check(announced(t.next()).is_empty(), "not reached");
    t.at(30_000).tick(LEASE_UNTIL);
    let out = t.next();
    C03.check(
        announced(out) == [(2, 2)],
        "Y expired: drained 2 without it",
    );
    t.lease(Y, 0, LEASE_UNTIL + 30_000, None);
    let out = t.next();
    C03.check(
        announced(out) == [(2, 1)],
        "Y awaited again: drained falls to 1",
    );
    t.record(2, 0, COLD, None);
    t.record(2, 1, COLD, None);
    let out = t.next();
    C03.check(
        announced(out) == [(2, 2)],
        "the kept marker applied again is passed",
    );
    t
}

// ---------------------------------------------------------------------------------- C4

pub(super) fn c04_reached_when_position_at_end() -> Trace {
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
        C04.check(announced(out).is_empty(), "not reached before position 3");
    }
    let out = t.next();
    C04.check(
        announced(out) == [(2, 2)],
        "reached once record 2 is processed",
    );
    C04.check(
        commits(out).first().is_some_and(|c| c.0 == 2 && c.1 == 3),
        "offset 3 committed",
    );
    t
}

pub(super) fn c04_committed_offset_counts_as_position() -> Trace {
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
    C04.check(
        announced(out).contains(&(2, 2)),
        "the committed offset reaches the marker",
    );
    t
}
