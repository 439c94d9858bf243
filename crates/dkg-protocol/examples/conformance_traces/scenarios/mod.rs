//! The scenarios of the conformance traces, one function per trace, named after the rule it pins
//! (`docs/spec.md` 9.3). Each asserts what its rule says about the outputs recorded, so a change of
//! the core that contradicts a rule stops the generator rather than rewriting the trace.

mod rules_c01_c04;
mod rules_c05_c10;
mod rules_c11_c19;

use rules_c01_c04::*;
use rules_c05_c10::*;
use rules_c11_c19::*;

use crate::driver::{Config, Effect, NOW_MS, Out, Trace, Y, Z, doc};
use dkg_kafka_core::assignment::Assignment;

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

/// A rule of `docs/spec.md` 9.3: every failed check names the rule its scenario pins.
#[derive(Clone, Copy)]
struct Rule(&'static str);

impl Rule {
    #[track_caller]
    fn check(self, ok: bool, what: &str) {
        assert!(ok, "{}: {what}", self.0);
    }
}

const C01: Rule = Rule("C01");
const C02: Rule = Rule("C02");
const C03: Rule = Rule("C03");
const C04: Rule = Rule("C04");
const C05: Rule = Rule("C05");
const C06: Rule = Rule("C06");
const C07: Rule = Rule("C07");
const C08: Rule = Rule("C08");
const C09: Rule = Rule("C09");
const C10: Rule = Rule("C10");
const C11: Rule = Rule("C11");
const C12: Rule = Rule("C12");
const C13: Rule = Rule("C13");
const C14: Rule = Rule("C14");
const C15: Rule = Rule("C15");
const C16: Rule = Rule("C16");
const C17: Rule = Rule("C17");
const C18: Rule = Rule("C18");
const C19: Rule = Rule("C19");

/// Every trace, in file-name order.
pub fn all() -> Vec<Trace> {
    let mut all = vec![
        c01_last_well_formed_epoch_header(),
        c02_lease_clamped_to_max_lease(),
        c02_expired_lease_not_awaited(),
        c02_closed_lease_awaited_after_expiry(),
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
        c07_trailing_nul_of_a_python_commit_ignored(),
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

/// Epochs 1 and 2 known (`hot` moves from partition 1 to 2), `owned` assigned, Y's marker of 1
/// passed, the other partitions drained 1 (no progress of 2 anywhere).
fn two_epochs(t: &mut Trace, owned: &[u32]) {
    settled(t, &doc(4, 1, &[(HOT, 1)], &[]), owned);
    t.control(&doc(4, 2, &[(HOT, 2)], &[]));
}

/// Epochs 1, 2 and 3 known (`hot` on partition 1, then 2), `cold` on 0 throughout.
fn three_epochs(t: &mut Trace, owned: &[u32]) {
    two_epochs(t, owned);
    t.control(&doc(4, 3, &[(HOT, 2)], &[]));
}

/// Record headers: name, value (`None`: a header without value).
type Headers<'a> = &'a [(&'a str, Option<&'a [u8]>)];
