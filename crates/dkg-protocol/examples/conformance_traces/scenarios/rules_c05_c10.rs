//! The scenarios of rules C5-C10: drained, commits and announcements, holding and release.

use super::*;

// ---------------------------------------------------------------------------------- C5

pub(super) fn c05_held_record_of_its_epoch_does_not_block() -> Trace {
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
    C05.check(held(out, 2) == 1, "still held");
    C05.check(
        announced(out) == [(2, 2)],
        "passed despite the held record of epoch 2",
    );
    C05.check(
        commits(out).first().is_some_and(|c| c.1 == 0),
        "the commit stays below the held record",
    );
    t
}

pub(super) fn c05_lower_epoch_passed_while_older_record_waits() -> Trace {
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
    C05.check(announced(out) == [(2, 2)], "Y passed 2, not 3");
    t.progress(1, 2);
    let out = t.next();
    C05.check(delivered(out) == [(2, 0)], "released");
    C05.check(announced(out) == [(2, 3)], "processed: Y passed 3");
    t
}

// ---------------------------------------------------------------------------------- C6

pub(super) fn c06_drained_waits_for_every_awaited_producer() -> Trace {
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
    C06.check(announced(t.next()).is_empty(), "Z's marker of 2 is missing");
    t.marker(Z, 2, &[0, 0, 1, 0]);
    C06.check(
        announced(t.next()).is_empty(),
        "Z's marker of 2 not reached",
    );
    t.record(2, 0, COLD, None);
    let out = t.next();
    C06.check(announced(out) == [(2, 2)], "both passed: drained 2");
    t
}

pub(super) fn c06_first_epoch_not_awaited() -> Trace {
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
    C06.check(announced(out) == [(2, 2)], "Z not awaited for 2");
    t
}

pub(super) fn c06_drained_falls_when_a_lease_appears() -> Trace {
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
    C06.check(announced(out) == [(2, 2)], "drained 2");
    t.lease(Z, 1, LEASE_UNTIL, None);
    t.next();
    t.marker(Z, 2, &[0; 4]);
    let out = t.next();
    C06.check(announced(out) == [(2, 2)], "drained 2 again");
    t
}

// ---------------------------------------------------------------------------------- C7

pub(super) fn c07_hook_commit_then_announce() -> Trace {
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
    C07.check(
        order == ["hook", "commit", "announce"],
        "hook, commit, announce",
    );
    C07.check(announced(out) == [(1, 2)], "partition 1 drained 2");
    t.record(3, 0, COLD, Some(2));
    t.record(3, 1, HOT, None);
    let out = t.commit();
    C07.check(commits(out).len() == 2, "both partitions committed");
    t
}

pub(super) fn c07_trailing_nul_of_a_python_commit_ignored() -> Trace {
    let mut t = trace(
        "C07-trailing-nul-of-a-python-commit-ignored",
        "confluent-kafka (Python) commits metadata with its C string's terminating NUL. Partition \
         2 is taken with committed offset 5 and such metadata (`n` 9, `u` [1, 3], then a NUL): it \
         is read as without the NUL, so of records 5-8 the previous owner's processed 5 and 7 are \
         skipped (C11) and 6 and 8 delivered.",
        &[COLD],
    );
    settled(&mut t, &doc(4, 1, &[(HOT, 1)], &[]), &[0]);
    let meta = format!(r#"{{"v":1,"d":1,"p":{{"{Y}":[1,0]}},"n":9,"u":[1,3]}}"#) + "\0";
    t.assign(&[(2, Some(5), &meta)]);
    let mut skipped = Vec::new();
    let mut out_delivered = Vec::new();
    for o in 5..9 {
        let out = t.record(2, o, COLD, None);
        skipped.extend(out.skipped.iter().map(|s| s[1]));
        out_delivered.extend(delivered(out).into_iter().map(|(_, o)| o));
    }
    C07.check(skipped == [5, 7], "5 and 7 skipped: the window was read");
    C07.check(out_delivered == [6, 8], "6 and 8 delivered");
    t
}

pub(super) fn c07_metadata_over_limit_leaves_out_window() -> Trace {
    let cfg = Config {
        max_metadata_bytes: 80,
        ..Config::default()
    };
    let mut t = Trace::new(
        "C07-metadata-over-limit-leaves-out-window",
        "`max_metadata_bytes` 80. Partition 2 holds records of `hot` stamped 2 at offsets 0-5 \
         and drains 2: the metadata with the window (`n`, `u`) would exceed the limit, so it is \
         committed without them, and that commit is counted (`windows_left_out`).",
        &[HOT],
        cfg,
    );
    two_epochs(&mut t, &[2]);
    for o in 0..6 {
        t.record(2, o, HOT, Some(2));
    }
    t.marker(Y, 2, &[0, 0, 6, 0]);
    let out = t.next();
    C07.check(
        commits(out)
            .first()
            .is_some_and(|c| !c.2.contains("\"n\"") && !c.2.contains("\"u\"")),
        "metadata without the window",
    );
    C07.check(
        out.anomalies
            .as_ref()
            .is_some_and(|a| a.windows_left_out == 1),
        "the commit that left out its window is counted",
    );
    t
}

// ---------------------------------------------------------------------------------- C8

pub(super) fn c08_held_until_old_partition_drained() -> Trace {
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
    C08.check(
        delivered(out).is_empty() && held(out, 2) == 1,
        "held while partition 1 drained 1",
    );
    let out = t.record(0, 0, COLD, Some(2));
    C08.check(
        delivered(out) == [(0, 0)],
        "no other home: delivered at once",
    );
    t.marker(Y, 2, &[1, 0, 0, 0]);
    let out = t.next();
    C08.check(
        held(out, 2) == 1,
        "its own partition draining 2 does not release it",
    );
    let out = t.progress(3, 2);
    C08.check(held(out, 2) == 1, "partition 3 is no home of hot");
    t.progress(1, 2);
    let out = t.next();
    C08.check(
        delivered(out) == [(2, 0)],
        "released once partition 1 drained 2",
    );
    t
}

pub(super) fn c08_unknown_assignment_counts_every_partition() -> Trace {
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
    C08.check(
        held(t.next(), 2) == 1,
        "epoch 2 unknown: every partition is a home",
    );
    t.progress(0, 3);
    C08.check(held(t.next(), 2) == 1, "partition 3 still at 1");
    t.progress(3, 3);
    let out = t.next();
    C08.check(
        delivered(out) == [(2, 0)],
        "released once every other partition drained 3",
    );
    t
}

pub(super) fn c08_epochs_below_settled_not_waited_for() -> Trace {
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
    C08.check(delivered(out) == [(2, 0)], "released by partition 3 alone");
    t
}

// ---------------------------------------------------------------------------------- C9

pub(super) fn c09_held_records_released_in_key_order() -> Trace {
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
    C09.check(held(out, 2) == 4, "all held");
    t.progress(1, 2);
    let out = t.next();
    C09.check(
        delivered(out) == [(2, 0), (2, 1), (2, 3)],
        "epoch 2 in order, past epoch 3",
    );
    t.progress(1, 3);
    let out = t.next();
    C09.check(
        delivered(out) == [(2, 2)],
        "epoch 3 when partition 1 drained 3",
    );
    t
}

// ---------------------------------------------------------------------------------- C10

pub(super) fn c10_unstamped_and_keyless() -> Trace {
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
    C10.check(delivered(out) == [(2, 1)], "keyless: at once");
    let out = t.record(2, 2, HOT, None);
    C10.check(
        delivered(out) == [(2, 2)],
        "unstamped, held epochs above H: at once",
    );
    t
}

pub(super) fn c10_unstamped_queues_behind_held_records() -> Trace {
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
    C10.check(announced(out) == [(2, 2)], "H = 2");
    let out = t.record(2, 1, HOT, None);
    C10.check(held(out, 2) == 2, "held behind the stamped record");
    let out = t.record(2, 2, COLD, None);
    C10.check(delivered(out) == [(2, 2)], "cold at once");
    t.progress(1, 2);
    let out = t.next();
    C10.check(delivered(out) == [(2, 0), (2, 1)], "released in order");
    t
}
