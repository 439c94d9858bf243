//! The scenarios of rules C11-C19: skip windows, pause and resume, splits, unknown epochs.

use super::*;

// ---------------------------------------------------------------------------------- C11, C12

pub(super) fn c11_skip_window() -> Trace {
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
    C11.check(skipped == [5, 7], "5 and 7 skipped");
    for o in 5..8 {
        let out = t.record(3, o, COLD, None);
        C11.check(delivered(out) == [(3, o)], "no committed offset: no window");
    }
    t
}

pub(super) fn c11_revoked_then_taken_again() -> Trace {
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
    C11.check(
        committed.len() == 1
            && committed[0].1 == 1
            && committed[0].2.contains(r#""n":6,"u":[0,2,4]"#),
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
    C11.check(skipped == [2, 4], "the processed records are skipped");
    C11.check(again.is_empty(), "nothing delivered twice");
    C11.check(held(t.last(), 2) == 3, "the held records are held again");
    t.progress(1, 2);
    let out = t.next();
    C11.check(delivered(out) == [(2, 1), (2, 3), (2, 5)], "and released");
    t
}

pub(super) fn c12_skip_passed() -> Trace {
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
    C12.check(out.skipped == [[2, 3]], "stamped 1 below 6: skipped");
    let out = t.record(2, 4, COLD, None);
    C12.check(delivered(out) == [(2, 4)], "unstamped: never skipped");
    let out = t.record(2, 5, COLD, Some(2));
    C12.check(out.skipped.is_empty(), "epoch 2 not skipped");
    let out = t.record(2, 6, COLD, Some(1));
    C12.check(out.skipped.is_empty(), "offset 6 not skipped");
    t
}

// ---------------------------------------------------------------------------------- C13

pub(super) fn c13_pause_and_resume_when_halved() -> Trace {
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
    C13.check(out.effects == [Effect::Pause(2)], "paused over max_held");
    t.progress(1, 2);
    let out = t.next();
    C13.check(delivered(out).len() == 3, "released");
    let out = t.at(200).tick(NOW_MS + 200);
    C13.check(out.effects == [Effect::Resume(2)], "resumed once halved");
    t
}

pub(super) fn c13_stall_timeout_resumes() -> Trace {
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
    C13.check(out.effects == [Effect::Pause(2)], "paused");
    let out = t.at(5999).tick(NOW_MS + 5999);
    C13.check(
        out.effects.is_empty(),
        "still paused before the stall timeout",
    );
    let out = t.at(6000).tick(NOW_MS + 6000);
    C13.check(
        out.effects == [Effect::Resume(2)],
        "resumed by the stall timeout",
    );
    t.record(2, 3, HOT, Some(2));
    let out = t.at(7000).tick(NOW_MS + 7000);
    C13.check(out.effects.is_empty(), "not paused again before halving");
    t
}

pub(super) fn c13_resumed_at_half_of_max_held() -> Trace {
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
    C13.check(out.effects == [Effect::Pause(2)], "paused at 6");
    for (i, p) in [1, 0, 3].into_iter().enumerate() {
        t.progress(p, 2);
        t.next();
        let out = t
            .at(200 + 100 * i as u64)
            .tick(NOW_MS + 200 + 100 * i as u64);
        let resumed = out.effects == [Effect::Resume(2)];
        C13.check(resumed == (p == 3), "resumed only at most max_held / 2");
    }
    t
}

// ---------------------------------------------------------------------------------- C14-C18

pub(super) fn c14_split_label_of_unstamped_records() -> Trace {
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
    C14.check(
        out.delivered == [vec![2, 0, 2]],
        "split label on partition 2",
    );
    let out = t.record(3, 0, HOT, None);
    C14.check(
        out.delivered == [vec![3, 0, 2]],
        "split label on partition 3",
    );
    t.marker(Y, 2, &[0, 0, 1, 0]);
    let out = t.next();
    C14.check(announced(out).contains(&(2, 2)), "partition 2 drained 2");
    let out = t.record(2, 1, HOT, None);
    C14.check(out.delivered == [vec![2, 1]], "whole once drained 2");
    t
}

pub(super) fn c15_whole_to_split_waits_for_old_home() -> Trace {
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
    C18.check(!out.effects.is_empty(), "split hook when the epoch is read");
    let out = t.record(2, 0, HOT, None);
    C15.check(held(out, 2) == 1, "held while partition 1 drained 1");
    t.progress(1, 2);
    let out = t.next();
    C15.check(out.delivered == [vec![2, 0, 2]], "released, labelled split");
    t
}

pub(super) fn c15_split_record_that_may_be_older_blocks_marker() -> Trace {
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
    C15.check(held(out, 2) == 1, "held");
    t.marker(Y, 3, &[0, 0, 1, 0]);
    let out = t.next();
    C15.check(announced(out).is_empty(), "partition 2 stays at 2");
    t.progress(1, 3);
    let out = t.next();
    C15.check(out.delivered == [vec![2, 0, 2]], "released");
    C15.check(announced(out) == [(2, 3)], "drained 3 once processed");
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

pub(super) fn c16_split_to_whole_waits_for_every_part() -> Trace {
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
    C16.check(held(t.next(), 0) == 1, "one part drained is not enough");
    t.progress(3, 2);
    let out = t.next();
    C16.check(
        delivered(out) == [(0, 0)],
        "released when both parts drained 2",
    );
    t
}

pub(super) fn c17_between_two_splits_nothing_waits() -> Trace {
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
    C17.check(out.delivered == [vec![1, 0, 2]], "delivered at once, split");
    t
}

pub(super) fn c18_unplaced_record_whole_and_split_hooks() -> Trace {
    let mut t = trace(
        "C18-unplaced-record-whole-and-split-hooks",
        "The first epoch the member learns splits `hot` over 2 and 3: the split hook runs at \
         once. An unstamped `hot` record on partition 0, where no known epoch places it, is \
         delivered at once, labelled whole. Epoch 2 makes `hot` whole on 3: the hook runs once \
         (whole again, partition 3); epoch 3, identical, runs no hook.",
        &[HOT],
    );
    let out = t.control(&doc(4, 1, &[], &[(HOT, &[2, 3])]));
    C18.check(out.effects.len() == 1, "split hook at start");
    t.lease(Y, 0, LEASE_UNTIL, None);
    t.assign(&[(0, None, ""), (2, None, "")]);
    t.marker(Y, 1, &[0; 4]);
    t.next();
    let out = t.record(0, 0, HOT, None);
    C18.check(out.delivered == [vec![0, 0]], "unplaced: whole, at once");
    let out = t.control(&doc(4, 2, &[(HOT, 3)], &[]));
    C18.check(out.effects.len() == 1, "whole again: one hook");
    let out = t.control(&doc(4, 3, &[(HOT, 3)], &[]));
    C18.check(out.effects.is_empty(), "no transition: no hook");
    t
}

// ---------------------------------------------------------------------------------- C19

pub(super) fn c19_unknown_epoch_released_after_wait() -> Trace {
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
    C19.check(held(out, 2) == 1, "held");
    let out = t.record(2, 1, HOT, Some(2));
    C19.check(delivered(out) == [(2, 1)], "not behind the unknown epoch");
    let out = t.at(10_999).tick(NOW_MS + 10_999);
    C19.check(held(out, 2) == 1, "held before the bound");
    let out = t.at(11_000).tick(NOW_MS + 11_000);
    C19.check(
        out.anomalies.as_ref().is_some_and(|a| a.unknown_epoch == 1),
        "released and counted",
    );
    let out = t.next();
    C19.check(delivered(out) == [(2, 0)], "delivered");
    t
}

pub(super) fn c19_unknown_epoch_becomes_known() -> Trace {
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
    C19.check(
        held(out, 2) == 1 && out.anomalies.is_none(),
        "held by C8, not counted",
    );
    t.progress(1, 3);
    let out = t.next();
    C19.check(
        delivered(out) == [(2, 0)],
        "released when partition 1 drained 3",
    );
    t
}

pub(super) fn c19_unknown_epoch_waits_behind_earlier_held_record() -> Trace {
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
    C19.check(held(out, 2) == 2, "both held");
    let out = t.at(10_000).tick(NOW_MS + 10_000);
    C19.check(
        held(out, 2) == 2 && out.anomalies.is_none(),
        "behind the earlier record of its key",
    );
    let out = t.at(12_000).progress(1, 2);
    C19.check(
        out.anomalies.as_ref().is_some_and(|a| a.unknown_epoch == 1),
        "counted when released",
    );
    let out = t.next();
    C19.check(delivered(out) == [(2, 0), (2, 1)], "in order");
    t
}
