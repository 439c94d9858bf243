//! The producer side's **stamp windows** (`docs/spec.md` 9.2.2): how long an ordering producer
//! stamps `dkg-epoch` on the records of keys that moved.
//!
//! A consumer needs a record's epoch only while the key's older records may still be unprocessed
//! on another partition, i.e. until its group has *settled* the switch (every partition drained
//! the new epoch, `crate::consumer`). Consumers announce what they drained on the handoff topic
//! (`progress/<group>/<topic>/<partition>`), so a producer can read when that is: it opens a
//! window when it adopts an epoch and closes it once every group it follows has settled the epoch
//! (or after a bound). Inside a window it stamps the records of keys whose home differs from their
//! home in the predecessor of any window still open; after the last window closed it stamps
//! nothing, so on a stationary stream the header tax lasts about a second per switch instead of
//! the whole epoch (`BENCHMARKS.md`, "Producer throughput").
//!
//! Rules ([`StampWindows::due`]):
//!
//! - Windows close **in order** (a window's predecessor list covers every epoch since the last
//!   closed one, so closing a newer window first would lose a move).
//! - A window of `E` closes only once this producer has announced `E` (its marker of `E` or
//!   later is in the log): before that no group can drain `E` anyway, and a group
//!   that appears meanwhile is then waited for too.
//! - It then closes when every **followed group** has settled `E`. A group is followed for the
//!   window of `E` when it has settled the window's predecessor epoch (it kept up with the
//!   switch before): a group left behind long ago (stopped, decommissioned, its progress records
//!   still in the compacted topic) would otherwise keep every window open to the bound. Since
//!   windows close in order, a live group has settled the predecessor by the time a window is
//!   considered, so this only drops groups that did not keep up with the previous switch.
//! - Or when it has been open for the bound ([`StampWindows::new`]'s `max_open`, the Rust
//!   producer's default 60 s): a group slower than that gets the guarantee of unstamped records
//!   only if it settles each switch before producers adopt the next epoch (the condition of the
//!   previous release's `EpochHeader::Moved`).
//!
//! Pure: the glue feeds it the open windows, what it announced, the groups' progress and its
//! monotonic clock.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use crate::consumer::Monotonic;
use crate::handoff::Progress;

/// The drained epochs the consumer groups announced, per data topic, group and partition (from
/// `progress/...` records; a later record of the same key replaces an earlier one, as it does for
/// consumers: a group whose offsets were reset announces lower values), with the highest value
/// each partition ever announced.
#[derive(Clone, Debug, Default)]
pub struct GroupProgress {
    topics: HashMap<String, Groups>,
}

/// group -> partition -> (drained, highest drained announced).
type Groups = HashMap<String, BTreeMap<u32, (u64, u64)>>;

/// A group's settled epochs over a topic's partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupSettled {
    /// The lowest drained value now (a partition without a record counts as 0).
    pub now: u64,
    /// The lowest of the highest values ever announced, over the partitions it announced: how
    /// far the group once got.
    pub best: u64,
}

impl GroupProgress {
    /// An empty view.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A progress record was read.
    pub fn on_progress(&mut self, p: &Progress) {
        self.topics
            .entry(p.topic.clone())
            .or_default()
            .entry(p.group.clone())
            .or_default()
            .entry(p.partition)
            .and_modify(|(now, best)| {
                *now = p.drained;
                *best = (*best).max(p.drained);
            })
            .or_insert((p.drained, p.drained));
    }

    /// A progress key was removed (a tombstone).
    pub fn on_removed(&mut self, group: &str, topic: &str, partition: u32) {
        if let Some(groups) = self.topics.get_mut(topic)
            && let Some(parts) = groups.get_mut(group)
        {
            parts.remove(&partition);
            if parts.is_empty() {
                groups.remove(group);
            }
        }
    }

    /// Per group of `topic`, what it has settled over `partitions` partitions.
    pub fn settled(&self, topic: &str, partitions: u32) -> impl Iterator<Item = GroupSettled> + '_ {
        self.topics
            .get(topic)
            .into_iter()
            .flat_map(|groups| groups.values())
            .map(move |parts| {
                let now = |p: u32| parts.get(&p).map_or(0, |x| x.0);
                GroupSettled {
                    now: (0..partitions).map(now).min().unwrap_or(0),
                    // Over the partitions it announced: a partition it has not announced yet
                    // (just added, or never assigned) does not make a group that kept up look
                    // left behind.
                    best: parts
                        .range(..partitions)
                        .map(|(_, x)| x.1)
                        .min()
                        .unwrap_or(0),
                }
            })
    }
}

/// An open window: the epoch adopted and the epoch of the placement before it (0: Kafka's
/// default placement or none known).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenWindow {
    pub epoch: u64,
    pub prev: u64,
}

/// Why windows closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// Every followed group settled the epoch (or no group follows the topic).
    Settled,
    /// Open for the bound.
    TimedOut,
}

impl CloseReason {
    /// The metric label.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            CloseReason::Settled => "settled",
            CloseReason::TimedOut => "timed_out",
        }
    }
}

/// When each window of each topic opened (first seen), and the close rule.
#[derive(Debug)]
pub struct StampWindows {
    max_open: Duration,
    opened: HashMap<(String, u64), Monotonic>,
}

impl StampWindows {
    /// Windows stay open at most `max_open`.
    #[must_use]
    pub fn new(max_open: Duration) -> Self {
        Self {
            max_open,
            opened: HashMap::new(),
        }
    }

    /// The highest epoch of `topic` whose window (and every older one) may close now, and why
    /// the newest of them closes. `open`: the topic's open windows, oldest first; `announced`:
    /// the highest epoch of `topic` this producer's markers announced; `groups`: what
    /// each group of the topic settled ([`GroupProgress::settled`]). A group is followed for a
    /// window when it once settled the window's predecessor (its best value, so a group that
    /// regressed, e.g. after an offset reset, stays followed and is waited for until it settles
    /// again); it has settled the window when its value now has.
    pub fn due(
        &mut self,
        topic: &str,
        open: &[OpenWindow],
        announced: u64,
        groups: &[GroupSettled],
        now: Monotonic,
    ) -> Option<(u64, CloseReason)> {
        // Windows gone without closing here (a retraction, a reset) are forgotten, so that a
        // reused epoch number starts its own clock.
        self.opened
            .retain(|(t, e), _| t != topic || open.iter().any(|w| w.epoch == *e));
        for w in open {
            self.opened
                .entry((topic.to_owned(), w.epoch))
                .or_insert(now);
        }
        let mut closed = None;
        for w in open {
            let since = self.opened[&(topic.to_owned(), w.epoch)];
            if announced < w.epoch {
                break;
            }
            let reason = if groups.iter().all(|g| g.best < w.prev || g.now >= w.epoch) {
                CloseReason::Settled
            } else if now.saturating_sub(since) >= self.max_open {
                CloseReason::TimedOut
            } else {
                break;
            };
            closed = Some((w.epoch, reason));
        }
        if let Some((upto, _)) = closed {
            self.forget(topic, upto);
        }
        closed
    }

    /// Windows of `topic` up to `epoch` are closed (or gone): forget when they opened.
    pub fn forget(&mut self, topic: &str, epoch: u64) {
        self.opened.retain(|(t, e), _| t != topic || *e > epoch);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A progress record of `group` on topic `t` (shared with the consumer's tests).
    pub(crate) fn progress(group: &str, partition: u32, drained: u64) -> Progress {
        Progress {
            group: group.into(),
            topic: "t".into(),
            partition,
            drained,
            passed: BTreeMap::new(),
            committed_offset: 0,
            updated_at_ms: 0,
        }
    }

    fn w(epoch: u64, prev: u64) -> OpenWindow {
        OpenWindow { epoch, prev }
    }

    /// Groups that never regressed: best = now.
    fn g(settled: &[u64]) -> Vec<GroupSettled> {
        settled
            .iter()
            .map(|&s| GroupSettled { now: s, best: s })
            .collect()
    }

    const T0: Duration = Duration::ZERO;

    #[test]
    fn a_group_settles_at_its_lowest_partition_and_a_missing_partition_counts_as_zero() {
        let mut g = GroupProgress::new();
        g.on_progress(&progress("a", 0, 3));
        g.on_progress(&progress("a", 1, 2));
        g.on_progress(&progress("b", 0, 5));
        let now = |g: &GroupProgress| {
            let mut v: Vec<u64> = g.settled("t", 2).map(|s| s.now).collect();
            v.sort_unstable();
            v
        };
        assert_eq!(now(&g), vec![0, 2]); // b has no record of partition 1
        g.on_progress(&progress("b", 1, 4));
        g.on_progress(&progress("a", 1, 3)); // replaces the earlier record
        assert_eq!(now(&g), vec![3, 4]);
        // A regression (an offset reset) replaces the value; the best stays.
        g.on_progress(&progress("b", 0, 1));
        g.on_progress(&progress("b", 0, 2));
        let b: Vec<GroupSettled> = g.settled("t", 2).filter(|s| s.now == 2).collect();
        assert_eq!(b, vec![GroupSettled { now: 2, best: 4 }]);
        // A partition added later (not announced yet): now 0, best over the announced ones.
        let c: Vec<GroupSettled> = g.settled("t", 3).filter(|s| s.best == 3).collect();
        assert_eq!(c, vec![GroupSettled { now: 0, best: 3 }]);
        g.on_removed("b", "t", 0);
        g.on_removed("b", "t", 1);
        assert_eq!(now(&g), vec![3]);
        assert_eq!(g.settled("other", 2).count(), 0);
    }

    #[test]
    fn a_window_closes_once_announced_and_settled_by_every_group_that_kept_up() {
        // (open windows, announced, groups' settled epochs, expected close)
        type Case<'a> = (&'a [OpenWindow], u64, &'a [u64], Option<(u64, CloseReason)>);
        let cases: &[Case<'_>] = &[
            // Not announced yet: stays open, whatever the groups say.
            (&[w(2, 1)], 1, &[5], None),
            // No group follows the topic: closes once announced.
            (&[w(2, 1)], 2, &[], Some((2, CloseReason::Settled))),
            // A group that kept up (settled the predecessor) has not settled it: open.
            (&[w(2, 1)], 2, &[1], None),
            (&[w(2, 1)], 2, &[2], Some((2, CloseReason::Settled))),
            // A group left behind before the previous switch is not followed.
            (&[w(3, 2)], 3, &[1, 3], Some((3, CloseReason::Settled))),
            // In order: the older window holds the newer one back.
            (&[w(2, 1), w(3, 2)], 3, &[1], None),
            (
                &[w(2, 1), w(3, 2)],
                3,
                &[2],
                Some((2, CloseReason::Settled)),
            ),
            (
                &[w(2, 1), w(3, 2)],
                3,
                &[3],
                Some((3, CloseReason::Settled)),
            ),
            // Announced only the older one.
            (
                &[w(2, 1), w(3, 2)],
                2,
                &[3],
                Some((2, CloseReason::Settled)),
            ),
        ];
        for (i, (open, announced, groups, want)) in cases.iter().enumerate() {
            let mut s = StampWindows::new(Duration::from_secs(60));
            assert_eq!(
                s.due("t", open, *announced, &g(groups), T0),
                *want,
                "case {i}"
            );
        }
    }

    #[test]
    fn a_window_times_out_from_when_it_was_first_seen() {
        let mut s = StampWindows::new(Duration::from_secs(60));
        let open = [w(2, 1), w(3, 2)];
        assert_eq!(s.due("t", &open[..1], 3, &g(&[1]), T0), None);
        // Window 3 is first seen 30 s later; the group settles 2 but not 3.
        let t30 = Duration::from_secs(30);
        assert_eq!(s.due("t", &open, 3, &g(&[1]), t30), None);
        let t60 = Duration::from_secs(60);
        assert_eq!(
            s.due("t", &open, 3, &g(&[2]), t60),
            Some((2, CloseReason::Settled))
        );
        assert_eq!(s.due("t", &open[1..], 3, &g(&[2]), t60), None);
        let t90 = Duration::from_secs(90);
        assert_eq!(
            s.due("t", &open[1..], 3, &g(&[2]), t90),
            Some((3, CloseReason::TimedOut))
        );
        // Another topic's windows are its own.
        assert_eq!(s.due("u", &open, 3, &g(&[1]), t90), None);
        // A window gone without closing (a retraction) is forgotten: the same epoch number
        // opened again later starts its own clock.
        assert_eq!(s.due("u", &[], 3, &g(&[1]), t90), None);
        let t100 = Duration::from_secs(100);
        assert_eq!(s.due("u", &open[..1], 3, &g(&[1]), t100), None);
    }

    #[test]
    fn a_group_that_regressed_stays_followed_until_it_settles_again() {
        let mut s = StampWindows::new(Duration::from_secs(60));
        let open = [w(3, 2), w(4, 3)];
        let regressed = [GroupSettled { now: 1, best: 3 }];
        assert_eq!(s.due("t", &open, 4, &regressed, T0), None);
        let back = [GroupSettled { now: 3, best: 3 }];
        assert_eq!(
            s.due("t", &open, 4, &back, T0),
            Some((3, CloseReason::Settled))
        );
    }

    #[test]
    fn a_group_whose_window_timed_out_is_not_followed_for_the_next_one() {
        let mut s = StampWindows::new(Duration::from_secs(60));
        let open = [w(2, 1), w(3, 2)];
        assert_eq!(s.due("t", &open, 3, &g(&[1]), T0), None);
        // Still at 1 when window 2 times out: left behind, so window 3 closes with it.
        let t60 = Duration::from_secs(60);
        assert_eq!(
            s.due("t", &open, 3, &g(&[1]), t60),
            Some((3, CloseReason::Settled))
        );
    }
}
