//! LPT (longest processing time first) list scheduling, plain and migration-aware.
//!
//! Reference: R. L. Graham, "Bounds on Multiprocessing Timing Anomalies", SIAM J. Appl. Math. 17(2), 1969.
//! Jobs sorted by decreasing weight, each given to the currently least-loaded machine. LPT's makespan is
//! within `4/3 - 1/(3k)` of the optimum for the jobs it is given, and any list schedule (whatever the order)
//! has `max load <= total / k + largest job`.
//!
//! In DKG (Rivetti et al., DEBS 2015) the jobs are the heavy keys and the hash buckets of the other keys, the
//! machines are the topic's partitions. [`lpt_sticky`] is this project's migration-aware variant for
//! re-learning: it keeps jobs where they were unless that makes the schedule worse than a fresh LPT.
//!
//! Ties are deterministic so every process computes the same schedule: equal weights go in job-index order,
//! equal loads go to the lowest partition index. Loads saturate at `u64::MAX`.
//!
//! Grouped variants ([`lpt_grouped`], [`lpt_sticky_grouped`]) take a group per job: jobs of one group
//! (the parts of one split key) go to distinct partitions, each to the least-loaded partition its group
//! does not use yet. Without groups they are the plain functions.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::error::{Error, Result};

/// A placement of jobs on partitions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// `placement[job]` = the job's partition (`< loads.len()`).
    pub placement: Vec<u32>,
    /// Per-partition sum of the weights of its jobs.
    pub loads: Vec<u64>,
}

impl Schedule {
    /// The makespan: the largest partition load (0 without partitions).
    #[must_use]
    pub fn max_load(&self) -> u64 {
        self.loads.iter().copied().max().unwrap_or(0)
    }

    /// Sum of all loads (saturating).
    #[must_use]
    pub fn total(&self) -> u64 {
        self.loads.iter().fold(0u64, |a, &l| a.saturating_add(l))
    }
}

/// A migration-aware schedule with what it moved relative to the previous placement.
#[derive(Clone, Debug)]
pub struct StickySchedule {
    /// The new schedule.
    pub schedule: Schedule,
    /// Sum of the weights of jobs that had a valid previous partition and now sit on another one.
    pub moved_weight: u64,
    /// Number of such jobs.
    pub moved_jobs: usize,
}

/// Jobs of one group must sit on distinct partitions: `groups[job]` is the job's group, `None` for a
/// free job.
pub type Groups<'a> = Option<&'a [Option<u32>]>;

/// The partitions each group uses so far (only groups with a placed job have an entry).
#[derive(Default)]
struct Used {
    by_group: std::collections::HashMap<u32, Vec<u32>>,
}

impl Used {
    fn holds(&self, group: Option<u32>, p: u32) -> bool {
        group.is_some_and(|g| self.by_group.get(&g).is_some_and(|ps| ps.contains(&p)))
    }

    fn add(&mut self, group: Option<u32>, p: u32) {
        if let Some(g) = group {
            self.by_group.entry(g).or_default().push(p);
        }
    }

    fn remove(&mut self, group: Option<u32>, p: u32) {
        if let Some(ps) = group.and_then(|g| self.by_group.get_mut(&g)) {
            ps.retain(|&q| q != p);
        }
    }
}

fn group_of(groups: Groups<'_>, job: u32) -> Option<u32> {
    groups.and_then(|g| g.get(job as usize).copied().flatten())
}

/// Groups must have one entry per job and no group more jobs than partitions (else distinct
/// partitions are impossible).
fn check_groups(groups: Groups<'_>, jobs: usize, partitions: u32) -> Result<()> {
    let Some(groups) = groups else { return Ok(()) };
    if groups.len() != jobs {
        return Err(Error::InvalidConfig {
            field: "groups",
            reason: format!("has {} entries for {jobs} jobs", groups.len()),
        });
    }
    let mut sizes: std::collections::HashMap<u32, u64> = std::collections::HashMap::new();
    for g in groups.iter().flatten() {
        let n = sizes.entry(*g).or_default();
        *n += 1;
        if *n > u64::from(partitions) {
            return Err(Error::InvalidConfig {
                field: "groups",
                reason: format!("group {g} has more jobs than the {partitions} partitions"),
            });
        }
    }
    Ok(())
}

fn check_input(jobs: usize, partitions: u32) -> Result<()> {
    if partitions == 0 {
        return Err(Error::InvalidConfig {
            field: "partitions",
            reason: "must be at least 1".into(),
        });
    }
    // Job indices are u32 internally.
    if u32::try_from(jobs).is_err() {
        return Err(Error::InvalidConfig {
            field: "weights",
            reason: format!("{jobs} jobs, more than {}", u32::MAX),
        });
    }
    Ok(())
}

/// Job indices by decreasing weight, ties by increasing index.
fn lpt_order(weights: &[u64], jobs: &mut [u32]) {
    jobs.sort_unstable_by_key(|&j| (Reverse(weights[j as usize]), j));
}

/// Place `jobs` (already in LPT order) on the least-loaded partition each (for a grouped job: the
/// least-loaded one its group does not use yet), updating `loads`.
fn place_greedy(
    weights: &[u64],
    jobs: &[u32],
    loads: &mut [u64],
    placement: &mut [u32],
    groups: Groups<'_>,
    used: &mut Used,
) {
    // Min-heap on (load, partition): the lowest index wins ties.
    let mut heap: BinaryHeap<Reverse<(u64, u32)>> = loads
        .iter()
        .enumerate()
        .map(|(p, &l)| Reverse((l, p as u32)))
        .collect();
    let mut skipped = Vec::new();
    for &j in jobs {
        let group = group_of(groups, j);
        // At most the group's other jobs are skipped (fewer than the partitions: `check_groups`).
        let mut chosen = None;
        while let Some(Reverse((load, p))) = heap.pop() {
            if used.holds(group, p) {
                skipped.push(Reverse((load, p)));
            } else {
                chosen = Some((load, p));
                break;
            }
        }
        // Unreachable after `check_groups`; placing the job anyway keeps every job placed.
        let chosen = chosen.or_else(|| skipped.first().map(|&Reverse(x)| x));
        if let Some((load, p)) = chosen {
            let load = load.saturating_add(weights[j as usize]);
            loads[p as usize] = load;
            placement[j as usize] = p;
            used.add(group, p);
            heap.push(Reverse((load, p)));
        }
        heap.extend(
            skipped
                .drain(..)
                .filter(|&Reverse((_, q))| Some(q) != chosen.map(|c| c.1)),
        );
    }
}

/// LPT: jobs by decreasing weight (ties: lower job index first), each to the least-loaded partition (ties:
/// lowest index). O(n log n + n log k).
///
/// # Errors
/// [`Error::InvalidConfig`] if `partitions == 0` (or there are more than `u32::MAX` jobs).
pub fn lpt(weights: &[u64], partitions: u32) -> Result<Schedule> {
    lpt_grouped(weights, None, partitions)
}

/// [`lpt`] where the jobs of one group (`groups[job]`, `None` = no group) go to distinct partitions:
/// each job to the least-loaded partition its group does not use yet. `None` for `groups` is [`lpt`].
///
/// # Errors
/// As [`lpt`]; also [`Error::InvalidConfig`] if `groups` has another length than `weights` or a
/// group has more jobs than there are partitions.
pub fn lpt_grouped(weights: &[u64], groups: Groups<'_>, partitions: u32) -> Result<Schedule> {
    check_input(weights.len(), partitions)?;
    check_groups(groups, weights.len(), partitions)?;
    let mut jobs: Vec<u32> = (0..weights.len() as u32).collect();
    lpt_order(weights, &mut jobs);
    let mut loads = vec![0u64; partitions as usize];
    let mut placement = vec![0u32; weights.len()];
    place_greedy(
        weights,
        &jobs,
        &mut loads,
        &mut placement,
        groups,
        &mut Used::default(),
    );
    Ok(Schedule { placement, loads })
}

/// Moved weight and job count of `schedule` against `previous` (jobs without a valid previous partition
/// never count as moved).
fn moved(
    weights: &[u64],
    previous: &[Option<u32>],
    partitions: u32,
    schedule: &Schedule,
) -> (u64, usize) {
    let mut weight = 0u64;
    let mut jobs = 0usize;
    for (j, (&p, prev)) in schedule.placement.iter().zip(previous).enumerate() {
        if let Some(q) = *prev
            && q < partitions
            && q != p
        {
            weight = weight.saturating_add(weights[j]);
            jobs += 1;
        }
    }
    (weight, jobs)
}

/// Migration-aware LPT.
///
/// `previous[job]` is the job's current partition; `None` or an out-of-range partition means the job must
/// be placed (a new job). The target is the makespan `T` of a fresh [`lpt`] on the same jobs. Jobs stay
/// where they are, except on partitions loaded above `T`: from each of those, while it is above `T`, the
/// smallest single job whose weight covers the excess is removed if there is one, else the largest job
/// (ties: lowest job index). The removed and new jobs are then placed LPT-style on the least-loaded
/// partitions. If that ends above `T`, the attempt is repeated with removal thresholds between `T` and the
/// mean load (freeing more room on the overloaded partitions). Each attempt that ends above `T` (and one
/// that keeps every job, only placing the new ones) is also repaired: its smallest jobs are moved off the
/// partitions above `T` to the least-loaded ones while they fit within `T`; a repair that reaches `T` is
/// a candidate. The fresh LPT schedule, as it is and with its partitions relabelled to overlap the
/// previous placement as much as possible (greedy matching), are candidates too; the candidate that
/// moves the least weight wins. So the result is never worse in max load than [`lpt`] and never moves
/// more weight than it; when the previous placement already has max load `<= T`, nothing moves.
///
/// `moved_weight`/`moved_jobs` count jobs with a valid previous partition that end up elsewhere.
///
/// # Errors
/// [`Error::InvalidConfig`] if `partitions == 0`, `previous.len() != weights.len()` (or there are more
/// than `u32::MAX` jobs).
pub fn lpt_sticky(
    weights: &[u64],
    previous: &[Option<u32>],
    partitions: u32,
) -> Result<StickySchedule> {
    lpt_sticky_with_slack(weights, previous, partitions, 0)
}

/// [`lpt_sticky`] with a tolerance: the target makespan is `T + slack` instead of the fresh LPT's `T`.
///
/// A fresh LPT over many small jobs packs partitions to within a fraction of a percent of the mean, far
/// tighter than the sampling noise of the window the weights come from; demanding that exact makespan from
/// a sticky schedule would move most of the load for a gain no one can measure. A slack of a couple of
/// percent of the mean load keeps a stationary stream's re-learn nearly free of moves. With `slack = 0`
/// this is [`lpt_sticky`].
///
/// # Errors
/// As [`lpt_sticky`].
pub fn lpt_sticky_with_slack(
    weights: &[u64],
    previous: &[Option<u32>],
    partitions: u32,
    slack: u64,
) -> Result<StickySchedule> {
    lpt_sticky_grouped(weights, previous, None, partitions, slack)
}

/// [`lpt_sticky_with_slack`] with groups as in [`lpt_grouped`]: the jobs of one group end on distinct
/// partitions. A grouped job whose previous partition another job of its group keeps (an earlier job
/// index wins) is placed like a new job.
///
/// # Errors
/// As [`lpt_sticky`] and [`lpt_grouped`].
pub fn lpt_sticky_grouped(
    weights: &[u64],
    previous: &[Option<u32>],
    groups: Groups<'_>,
    partitions: u32,
    slack: u64,
) -> Result<StickySchedule> {
    check_input(weights.len(), partitions)?;
    check_groups(groups, weights.len(), partitions)?;
    if previous.len() != weights.len() {
        return Err(Error::InvalidConfig {
            field: "previous",
            reason: format!("has {} entries for {} jobs", previous.len(), weights.len()),
        });
    }
    lpt_sticky_candidates(weights, previous, groups, partitions, slack, true)
}

/// The body of [`lpt_sticky_grouped`] after the input checks; `repair = false` is the algorithm before
/// [`repair_to_target`] (kept for the test that the repair never moves more).
fn lpt_sticky_candidates(
    weights: &[u64],
    previous: &[Option<u32>],
    groups: Groups<'_>,
    partitions: u32,
    slack: u64,
    repair: bool,
) -> Result<StickySchedule> {
    let fresh = lpt_grouped(weights, groups, partitions)?;
    let target = fresh.max_load().saturating_add(slack);
    let total = fresh.total();
    let mean = total.div_ceil(u64::from(partitions));

    // Remove jobs from partitions above a removal threshold, then place the pool greedily. The first
    // threshold is the target itself (moves least); when the greedy placement of the pool overshoots, lower
    // thresholds free more room on the overloaded partitions. Each attempt is O(n log n).
    let span = target.saturating_sub(mean);
    let thresholds = [
        target,
        mean + span * 3 / 4,
        mean + span / 2,
        mean + span / 4,
        mean,
    ];
    let mut chosen = Vec::new();
    let mut last_threshold = None;
    // With the repair, the first attempt keeps every job (nothing removed, only new jobs placed): moving
    // small jobs off its overloaded partitions is often the least movement of all.
    let keep_all = repair.then_some(u64::MAX);
    for threshold in keep_all.into_iter().chain(thresholds) {
        if last_threshold == Some(threshold) {
            continue;
        }
        last_threshold = Some(threshold);
        let attempt = sticky_attempt(weights, previous, groups, partitions, threshold);
        if attempt.max_load() <= target {
            chosen.push(attempt);
            break;
        }
        if repair && let Some(repaired) = repair_to_target(weights, groups, target, attempt) {
            chosen.push(repaired);
        }
    }
    // The fresh LPT is always within the target; relabelling its partitions to overlap the previous
    // placement (LPT's labels are arbitrary, its loads are not) often moves less than a sticky attempt that
    // had to free a lot of room. Take whichever candidate moves the least weight (ties: sticky first).
    let relabelled = relabel_to_previous(weights, previous, partitions, fresh.clone());
    let mut best: Option<(Schedule, u64, usize)> = None;
    for candidate in chosen.into_iter().chain([relabelled, fresh]) {
        let (w, n) = moved(weights, previous, partitions, &candidate);
        if best.as_ref().is_none_or(|&(_, bw, _)| w < bw) {
            best = Some((candidate, w, n));
        }
    }
    let (schedule, moved_weight, moved_jobs) = match best {
        Some(b) => b,
        // Unreachable: the candidate list always holds the fresh schedule.
        None => (lpt_grouped(weights, groups, partitions)?, 0, 0),
    };
    Ok(StickySchedule {
        schedule,
        moved_weight,
        moved_jobs,
    })
}

/// Move jobs off the partitions of `schedule` loaded above `target`, smallest positive job first, each to
/// the least-loaded partition its group does not use, while it fits there within `target`. `None` if a
/// partition stays above `target`.
///
/// Why smallest first: an attempt overshoots when the job it removed to cover a partition's excess was a
/// heavy key the greedy re-placement could not fit; the hash buckets (about a mean load / mu each) cover
/// the same excess with little more than the excess moved. A partition at or below `target` only receives
/// jobs and never exceeds `target` again, so each over-target partition is drained once, its jobs in
/// ascending order, and an ungrouped job that does not fit on the least-loaded partition means no larger
/// one does: O(n log n + moves log k).
fn repair_to_target(
    weights: &[u64],
    groups: Groups<'_>,
    target: u64,
    mut schedule: Schedule,
) -> Option<Schedule> {
    let k = schedule.loads.len();
    let mut on_partition: Vec<Vec<u32>> = vec![Vec::new(); k];
    let mut used = Used::default();
    for (j, &p) in schedule.placement.iter().enumerate() {
        used.add(group_of(groups, j as u32), p);
        if schedule.loads[p as usize] > target && weights[j] > 0 {
            on_partition[p as usize].push(j as u32);
        }
    }
    // Ordered (load, partition): the first entry is the least-loaded partition (ties: lowest index).
    let mut by_load: std::collections::BTreeSet<(u64, u32)> = schedule
        .loads
        .iter()
        .enumerate()
        .map(|(p, &l)| (l, p as u32))
        .collect();
    let mut over: Vec<u32> = (0..k as u32)
        .filter(|&p| schedule.loads[p as usize] > target)
        .collect();
    // Most loaded first (ties: lowest index): it gets the emptiest destinations.
    over.sort_unstable_by_key(|&p| (Reverse(schedule.loads[p as usize]), p));
    for p in over {
        let jobs = &mut on_partition[p as usize];
        jobs.sort_unstable_by_key(|&j| (weights[j as usize], j));
        for &j in jobs.iter() {
            if schedule.loads[p as usize] <= target {
                break;
            }
            let w = weights[j as usize];
            let group = group_of(groups, j);
            // Over-target partitions (`p` among them) cannot take a positive job within `target`.
            let Some(&(load, q)) = by_load.iter().find(|&&(_, q)| !used.holds(group, q)) else {
                continue;
            };
            if load.saturating_add(w) > target {
                if group.is_none() {
                    break;
                }
                continue;
            }
            by_load.remove(&(load, q));
            by_load.insert((load + w, q));
            let from = schedule.loads[p as usize];
            by_load.remove(&(from, p));
            by_load.insert((from - w, p));
            schedule.loads[p as usize] = from - w;
            schedule.loads[q as usize] = load + w;
            schedule.placement[j as usize] = q;
            used.remove(group, p);
            used.add(group, q);
        }
        if schedule.loads[p as usize] > target {
            return None;
        }
    }
    Some(schedule)
}

/// One sticky attempt: keep every job on its previous partition, then remove jobs from partitions loaded
/// above `threshold` (the smallest single job covering the excess if there is one, else the largest job;
/// ties: lowest job index) and place the removed and new jobs LPT-style on the least-loaded partitions.
fn sticky_attempt(
    weights: &[u64],
    previous: &[Option<u32>],
    groups: Groups<'_>,
    partitions: u32,
    threshold: u64,
) -> Schedule {
    let k = partitions as usize;
    let mut loads = vec![0u64; k];
    let mut placement = vec![0u32; weights.len()];
    let mut on_partition: Vec<Vec<u32>> = vec![Vec::new(); k];
    let mut pool: Vec<u32> = Vec::new();
    let mut used = Used::default();
    for (j, prev) in previous.iter().enumerate() {
        let group = group_of(groups, j as u32);
        match *prev {
            Some(p) if p < partitions && !used.holds(group, p) => {
                loads[p as usize] = loads[p as usize].saturating_add(weights[j]);
                placement[j] = p;
                on_partition[p as usize].push(j as u32);
                used.add(group, p);
            }
            _ => pool.push(j as u32),
        }
    }

    for (p, jobs) in on_partition.iter_mut().enumerate() {
        if loads[p] <= threshold {
            continue;
        }
        // Ascending weight, descending index among equals: the largest job with the lowest index is last
        // (a pop), and the smallest job covering the excess is a binary search. Removing that one ends the
        // loop, so each partition pays at most one O(n) removal.
        jobs.sort_unstable_by_key(|&j| (weights[j as usize], Reverse(j)));
        while loads[p] > threshold {
            let excess = loads[p] - threshold;
            let at = jobs.partition_point(|&j| weights[j as usize] < excess);
            let removed = if at < jobs.len() {
                let w = weights[jobs[at] as usize];
                // The lowest index among the jobs of weight `w` is the last of them.
                let last = jobs.partition_point(|&j| weights[j as usize] <= w) - 1;
                Some(jobs.remove(last))
            } else {
                jobs.pop()
            };
            let Some(j) = removed else { break };
            loads[p] -= weights[j as usize];
            used.remove(group_of(groups, j), p as u32);
            pool.push(j);
        }
    }

    lpt_order(weights, &mut pool);
    place_greedy(
        weights,
        &pool,
        &mut loads,
        &mut placement,
        groups,
        &mut used,
    );
    Schedule { placement, loads }
}

/// Relabel the partitions of `schedule` so that as much weight as possible stays on its previous partition:
/// greedy maximum-weight matching on the overlap matrix (pairs by decreasing overlap, ties by lower
/// indices). Loads are permuted with the labels, so the max load is unchanged.
fn relabel_to_previous(
    weights: &[u64],
    previous: &[Option<u32>],
    partitions: u32,
    schedule: Schedule,
) -> Schedule {
    let pairs = overlap_pairs(weights, previous, partitions, &schedule.placement);
    let k = partitions as usize;
    let mut label: Vec<Option<u32>> = vec![None; k];
    let mut taken = vec![false; k];
    for (_, new, old) in pairs {
        if label[new as usize].is_none() && !taken[old as usize] {
            label[new as usize] = Some(old);
            taken[old as usize] = true;
        }
    }
    // Unmatched new partitions take the free labels in increasing order.
    let mut free = (0..partitions).filter(|&p| !taken[p as usize]);
    let label: Vec<u32> = label
        .into_iter()
        .map(|l| l.or_else(|| free.next()).unwrap_or(0))
        .collect();
    let mut loads = vec![0u64; k];
    for (new, &l) in schedule.loads.iter().enumerate() {
        loads[label[new] as usize] = l;
    }
    let placement = schedule
        .placement
        .iter()
        .map(|&p| label[p as usize])
        .collect();
    Schedule { placement, loads }
}

/// The non-zero cells `(overlap, new, old)` of the overlap matrix (the weight of the jobs `placement`
/// puts on `new` that were on `old`; saturating), by decreasing overlap, ties by lower indices.
///
/// The matrix is sparse (at most one non-zero cell per job), so it is built from sorted
/// `(new, old, weight)` triples, O(n log n): a dense `k x k` matrix took 800 MB and most of a
/// rebuild's time at 10,000 partitions (BENCHMARKS.md, "Scale").
fn overlap_pairs(
    weights: &[u64],
    previous: &[Option<u32>],
    partitions: u32,
    placement: &[u32],
) -> Vec<(u64, u32, u32)> {
    let mut cells: Vec<(u32, u32, u64)> = placement
        .iter()
        .zip(previous)
        .zip(weights)
        .filter_map(|((&new, prev), &w)| {
            prev.filter(|&old| old < partitions)
                .map(|old| (new, old, w))
        })
        .collect();
    cells.sort_unstable_by_key(|&(new, old, _)| (new, old));
    let mut pairs: Vec<(u64, u32, u32)> = cells
        .chunk_by(|a, b| (a.0, a.1) == (b.0, b.1))
        .map(|run| {
            let w = run.iter().fold(0u64, |a, &(_, _, w)| a.saturating_add(w));
            (w, run[0].0, run[0].1)
        })
        .filter(|&(w, _, _)| w > 0)
        .collect();
    pairs.sort_unstable_by_key(|&(w, new, old)| (Reverse(w), new, old));
    pairs
}

/// [`overlap_pairs`] as this crate computed them before, from a dense `k x k` matrix: the oracle the
/// sparse construction must match exactly.
#[cfg(test)]
fn overlap_pairs_dense(
    weights: &[u64],
    previous: &[Option<u32>],
    partitions: u32,
    placement: &[u32],
) -> Vec<(u64, u32, u32)> {
    let k = partitions as usize;
    let mut overlap = vec![0u64; k * k];
    for (j, (&new, prev)) in placement.iter().zip(previous).enumerate() {
        if let Some(old) = *prev
            && old < partitions
        {
            let cell = &mut overlap[new as usize * k + old as usize];
            *cell = cell.saturating_add(weights[j]);
        }
    }
    let mut pairs: Vec<(u64, u32, u32)> = Vec::new();
    for new in 0..k {
        for old in 0..k {
            let w = overlap[new * k + old];
            if w > 0 {
                pairs.push((w, new as u32, old as u32));
            }
        }
    }
    pairs.sort_unstable_by_key(|&(w, new, old)| (Reverse(w), new, old));
    pairs
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn table_driven_lpt() {
        struct Case {
            name: &'static str,
            weights: &'static [u64],
            k: u32,
            placement: &'static [u32],
            loads: &'static [u64],
        }
        let cases = [
            Case {
                name: "no jobs",
                weights: &[],
                k: 3,
                placement: &[],
                loads: &[0, 0, 0],
            },
            Case {
                name: "k = 1",
                weights: &[3, 1, 2],
                k: 1,
                placement: &[0, 0, 0],
                loads: &[6],
            },
            Case {
                name: "more partitions than jobs",
                weights: &[5, 9],
                k: 4,
                placement: &[1, 0],
                loads: &[9, 5, 0, 0],
            },
            Case {
                name: "all zero weights: every job to the lowest partition",
                weights: &[0, 0, 0],
                k: 2,
                placement: &[0, 0, 0],
                loads: &[0, 0],
            },
            Case {
                name: "ties: equal weights in job order, equal loads to the lowest partition",
                weights: &[4, 4, 4, 4],
                k: 2,
                placement: &[0, 1, 0, 1],
                loads: &[8, 8],
            },
            Case {
                // Graham's tight example for k = 2: LPT 7 vs optimum 6 ({3,3} | {2,2,2}); 7/6 = 4/3 - 1/6.
                name: "classic 4/3 example, k = 2",
                weights: &[3, 3, 2, 2, 2],
                k: 2,
                placement: &[0, 1, 0, 1, 0],
                loads: &[7, 5],
            },
            Case {
                // k = 3: 5,5,4,4,3,3,3 -> LPT 11, optimum 9; ratio 11/9 = 4/3 - 1/9.
                name: "classic 4/3 example, k = 3",
                weights: &[5, 5, 4, 4, 3, 3, 3],
                k: 3,
                placement: &[0, 1, 2, 2, 0, 1, 0],
                loads: &[11, 8, 8],
            },
            Case {
                name: "weights given out of order",
                weights: &[1, 10, 2, 7],
                k: 2,
                placement: &[1, 0, 1, 1],
                loads: &[10, 10],
            },
        ];
        for c in cases {
            let s = lpt(c.weights, c.k).unwrap();
            assert_eq!(s.placement, c.placement, "{}", c.name);
            assert_eq!(s.loads, c.loads, "{}", c.name);
        }
    }

    #[test]
    fn zero_partitions_is_an_error() {
        assert!(matches!(
            lpt(&[1], 0),
            Err(Error::InvalidConfig {
                field: "partitions",
                ..
            })
        ));
        assert!(matches!(
            lpt_sticky(&[1], &[None], 0),
            Err(Error::InvalidConfig {
                field: "partitions",
                ..
            })
        ));
        assert!(matches!(
            lpt_sticky(&[1, 2], &[None], 2),
            Err(Error::InvalidConfig {
                field: "previous",
                ..
            })
        ));
    }

    #[test]
    fn sticky_keeps_an_optimal_previous_placement() {
        let w = [5, 5, 4, 4, 3, 3, 3];
        // Optimal (makespan 9), different from LPT's 11.
        let prev = [
            Some(0),
            Some(1),
            Some(0),
            Some(1),
            Some(2),
            Some(2),
            Some(2),
        ];
        let s = lpt_sticky(&w, &prev, 3).unwrap();
        assert_eq!(s.moved_jobs, 0);
        assert_eq!(s.moved_weight, 0);
        assert_eq!(s.schedule.loads, vec![9, 9, 9]);
    }

    #[test]
    fn sticky_moves_the_smallest_covering_job() {
        // Everything on partition 0 (load 20). Fresh LPT: 6,3,2 | 4,3,2 -> makespan 11 = target.
        let w = [6, 4, 3, 3, 2, 2];
        let prev = [Some(0); 6];
        let s = lpt_sticky(&w, &prev, 2).unwrap();
        assert_eq!(lpt(&w, 2).unwrap().max_load(), 11);
        // Excess 9: no single job covers it, so the largest (6) goes; then excess 3: the first 3 (job 2) goes.
        assert_eq!(s.schedule.placement, vec![1, 0, 1, 0, 0, 0]);
        assert_eq!(s.schedule.loads, vec![11, 9]);
        assert_eq!((s.moved_jobs, s.moved_weight), (2, 9));
    }

    #[test]
    fn sticky_repair_moves_buckets_instead_of_the_heavy_key() {
        // A heavy key (4) and six buckets (1) on 2 partitions; previous: the key and three buckets on
        // partition 0 (7 | 3). Fresh LPT: 5 | 5 = target. The smallest job covering partition 0's excess of
        // 2 is the key; re-placed on the tie it lands on partition 0 again (7), every threshold equals the
        // mean, so before the repair the relabelled fresh LPT won, moving 4. Moving two buckets is enough.
        let w = [4, 1, 1, 1, 1, 1, 1];
        let prev = [0, 0, 0, 0, 1, 1, 1].map(Some);
        let before = lpt_sticky_candidates(&w, &prev, None, 2, 0, false).unwrap();
        assert_eq!((before.moved_jobs, before.moved_weight), (4, 4));
        assert_eq!(before.schedule.max_load(), 5);
        let s = lpt_sticky(&w, &prev, 2).unwrap();
        assert_eq!(s.schedule.loads, vec![5, 5]);
        // The two smallest (lowest-index) buckets of partition 0 move.
        assert_eq!(s.schedule.placement, vec![0, 1, 1, 0, 1, 1, 1]);
        assert_eq!((s.moved_jobs, s.moved_weight), (2, 2));
    }

    #[test]
    fn sticky_repair_keeps_groups_apart() {
        // Parts of one split key (group 0, weight 1 each) on partitions 0 and 2; partition 0 is 1 over the
        // target 5. The least-loaded partition (2) holds the sibling, so the part goes to partition 1.
        let w = [1, 1, 5, 4];
        let groups = [Some(0), Some(0), None, None];
        let kept = Schedule {
            placement: vec![0, 2, 0, 1],
            loads: vec![6, 4, 1],
        };
        let s = repair_to_target(&w, Some(&groups), 5, kept).unwrap();
        assert_eq!(s.placement, vec![1, 2, 0, 1]);
        assert_eq!(s.loads, vec![5, 5, 1]);
        // Without groups it takes the least-loaded partition.
        let kept = Schedule {
            placement: vec![0, 2, 0, 1],
            loads: vec![6, 4, 1],
        };
        assert_eq!(
            repair_to_target(&w, None, 5, kept).unwrap().placement,
            vec![2, 2, 0, 1]
        );
        // Nothing fits (the only smaller job would push partition 1 over 4): no repaired schedule.
        let kept = Schedule {
            placement: vec![0, 2, 0, 1],
            loads: vec![6, 4, 1],
        };
        assert_eq!(repair_to_target(&w, Some(&groups), 4, kept), None);
    }

    #[test]
    fn sticky_places_new_and_out_of_range_jobs() {
        let w = [5, 5, 3];
        let prev = [Some(0), None, Some(7)];
        let s = lpt_sticky(&w, &prev, 2).unwrap();
        assert_eq!(s.schedule.placement, vec![0, 1, 0]);
        // New jobs are not "moved".
        assert_eq!((s.moved_jobs, s.moved_weight), (0, 0));
    }

    #[test]
    fn sticky_can_beat_lpt_when_previous_is_good() {
        // LPT's makespan is 7 ({3,2,2} | {3,2}); keeping {3,3} together and adding the 2s elsewhere gives 6 | 6.
        let w = [3, 3, 2, 2, 2];
        let prev = [Some(0), Some(0), None, None, None];
        let s = lpt_sticky(&w, &prev, 2).unwrap();
        assert_eq!(s.schedule.loads, vec![6, 6]);
        assert_eq!(s.schedule.placement, vec![0, 0, 1, 1, 1]);
        assert_eq!((s.moved_jobs, s.moved_weight), (0, 0));
    }

    #[test]
    fn sticky_falls_back_to_fresh_lpt() {
        // Target 10 (LPT: 4,3,3 | 4,3,3). Keeping the previous placements and adding the pool gives 11 | 9,
        // so the fresh LPT is returned; job 2 moves from partition 1 to 0.
        let w = [4, 4, 3, 3, 3, 3];
        let prev = [Some(0), None, Some(1), Some(1), None, None];
        let s = lpt_sticky(&w, &prev, 2).unwrap();
        assert_eq!(s.schedule, lpt(&w, 2).unwrap());
        assert_eq!((s.moved_jobs, s.moved_weight), (1, 3));
    }

    fn distinct_per_group(groups: &[Option<u32>], placement: &[u32]) -> bool {
        let mut seen = std::collections::HashSet::new();
        groups
            .iter()
            .zip(placement)
            .all(|(g, &p)| g.is_none_or(|g| seen.insert((g, p))))
    }

    #[test]
    fn grouped_jobs_go_to_distinct_partitions() {
        // Plain LPT stacks the two 4s on partition 1 (10 | 4, 4, 3).
        let w = [10, 4, 4, 3];
        let plain = lpt(&w, 2).unwrap();
        assert_eq!(plain.placement, vec![0, 1, 1, 1]);
        // Jobs 1 and 2 (the 4s) in one group: the second may not join the first on partition 1.
        let groups = [None, Some(7), Some(7), None];
        let s = lpt_grouped(&w, Some(&groups), 2).unwrap();
        assert_eq!(s.placement, vec![0, 1, 0, 1]);
        assert_eq!(s.loads, vec![14, 7]);
        assert!(distinct_per_group(&groups, &s.placement));
        // No groups at all is plain LPT.
        assert_eq!(lpt_grouped(&w, None, 2).unwrap(), plain);
        assert_eq!(lpt_grouped(&w, Some(&[None; 4]), 2).unwrap(), plain);
    }

    #[test]
    fn a_group_larger_than_the_partition_count_is_an_error() {
        let groups = [Some(0), Some(0), Some(0)];
        assert!(matches!(
            lpt_grouped(&[1, 1, 1], Some(&groups), 2),
            Err(Error::InvalidConfig {
                field: "groups",
                ..
            })
        ));
        assert!(matches!(
            lpt_grouped(&[1, 1], Some(&groups), 2),
            Err(Error::InvalidConfig {
                field: "groups",
                ..
            })
        ));
        assert!(lpt_grouped(&[1, 1, 1], Some(&groups), 3).is_ok());
    }

    #[test]
    fn sticky_grouped_keeps_parts_and_never_stacks_them() {
        // A split key (group 0) on partitions 0 and 1, kept; two parts named on one partition: the
        // second is placed anew, elsewhere.
        let w = [5, 5, 5, 3, 3];
        let groups = [Some(0), Some(0), Some(0), None, None];
        let prev = [Some(0), Some(1), Some(1), Some(2), Some(2)];
        let s = lpt_sticky_grouped(&w, &prev, Some(&groups), 3, 0).unwrap();
        assert!(distinct_per_group(&groups, &s.schedule.placement));
        assert_eq!(s.schedule.placement[0], 0);
        assert_eq!(s.schedule.placement[1], 1);
        assert_eq!(s.schedule.placement[2], 2);
        assert_eq!(s.schedule.max_load(), 8);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        #[test]
        fn sparse_overlap_pairs_equal_the_dense_matrix(
            // Small k against up to 200 jobs: many jobs share a cell; weights near u64::MAX saturate.
            jobs in proptest::collection::vec(
                (
                    proptest::prop_oneof![0_u64..50, (u64::MAX - 3)..=u64::MAX],
                    0_u32..12,
                    proptest::option::of(0_u32..14),
                ),
                0..200,
            ),
            k in 1_u32..12,
        ) {
            let weights: Vec<u64> = jobs.iter().map(|j| j.0).collect();
            let placement: Vec<u32> = jobs.iter().map(|j| j.1 % k).collect();
            let previous: Vec<Option<u32>> = jobs.iter().map(|j| j.2).collect();
            // The pairs are all `relabel_to_previous` reads of the schedule: equal pairs, equal relabelling.
            proptest::prop_assert_eq!(
                overlap_pairs(&weights, &previous, k, &placement),
                overlap_pairs_dense(&weights, &previous, k, &placement)
            );
        }
    }

    /// `groups` with each group capped at `k` jobs (the precondition), the excess made free jobs.
    fn capped_groups(groups: &[Option<u32>], k: u32) -> Vec<Option<u32>> {
        let mut size = std::collections::HashMap::new();
        groups
            .iter()
            .map(|g| {
                g.filter(|g| {
                    let s = size.entry(*g).or_insert(0_u32);
                    *s += 1;
                    *s <= k
                })
            })
            .collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        #[test]
        fn grouped_schedules_keep_groups_apart_and_every_job_placed(
            weights in proptest::collection::vec(0_u64..1000, 1..60),
            group_of in proptest::collection::vec(proptest::option::of(0_u32..4), 60),
            previous in proptest::collection::vec(proptest::option::of(0_u32..9), 60),
            k in 1_u32..9,
        ) {
            let n = weights.len();
            let groups = capped_groups(&group_of[..n], k);
            let fresh = lpt_grouped(&weights, Some(&groups), k).unwrap();
            proptest::prop_assert!(distinct_per_group(&groups, &fresh.placement));
            proptest::prop_assert!(fresh.placement.iter().all(|&p| p < k));
            proptest::prop_assert_eq!(fresh.total(), weights.iter().sum::<u64>());
            let sticky = lpt_sticky_grouped(&weights, &previous[..n], Some(&groups), k, 0).unwrap();
            proptest::prop_assert!(distinct_per_group(&groups, &sticky.schedule.placement));
            proptest::prop_assert!(sticky.schedule.max_load() <= fresh.max_load());
            proptest::prop_assert_eq!(sticky.schedule.total(), fresh.total());
        }

        #[test]
        fn the_repair_stays_within_the_target_and_never_moves_more(
            // Heavy keys among many small buckets: the case the repair is for.
            weights in proptest::collection::vec(
                proptest::prop_oneof![3 => 0_u64..20, 1 => 50_u64..400],
                1..80,
            ),
            group_of in proptest::collection::vec(proptest::option::of(0_u32..3), 80),
            previous in proptest::collection::vec(proptest::option::of(0_u32..10), 80),
            k in 1_u32..9,
            slack in proptest::prop_oneof![proptest::strategy::Just(0_u64), 0_u64..100],
        ) {
            let n = weights.len();
            let groups = capped_groups(&group_of[..n], k);
            let target = lpt_grouped(&weights, Some(&groups), k).unwrap().max_load() + slack;
            let old = lpt_sticky_candidates(&weights, &previous[..n], Some(&groups), k, slack, false)
                .unwrap();
            let new = lpt_sticky_grouped(&weights, &previous[..n], Some(&groups), k, slack).unwrap();
            proptest::prop_assert!(new.schedule.max_load() <= target);
            proptest::prop_assert!(new.moved_weight <= old.moved_weight);
            proptest::prop_assert!(distinct_per_group(&groups, &new.schedule.placement));
            proptest::prop_assert_eq!(new.schedule.total(), weights.iter().sum::<u64>());
            // Loads match the placement (the repair updates both).
            let mut loads = vec![0_u64; k as usize];
            for (j, &p) in new.schedule.placement.iter().enumerate() {
                loads[p as usize] += weights[j];
            }
            proptest::prop_assert_eq!(loads, new.schedule.loads);
        }
    }
}
