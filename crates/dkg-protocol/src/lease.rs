//! The producer side of ordering-safe migration, without Kafka: which leases an ordering producer
//! holds, which markers are due, and what each lease says after a renewal or a clean close.
//!
//! The Kafka glue (`kafka/ordering.rs` in `dkg-kafka`) owns the in-flight gate, writes the
//! markers ([`crate::marker`] decides their ends) and the leases this schedule hands it, and
//! passes in the wall clock (`now_ms`). The sequence per adopted epoch is `docs/spec.md` 9.2.

use std::collections::HashMap;

use crate::handoff::{Lease, ProducerId};

/// Lease bookkeeping of one topic.
#[derive(Debug, Clone)]
struct TopicLease {
    lease: Lease,
    /// Markers of this epoch (and all below) are in the log.
    announced: u64,
}

/// The leases of one ordering producer instance and the epochs its markers have announced.
#[derive(Debug, Clone)]
pub struct LeaseSchedule {
    id: ProducerId,
    lease_ms: u64,
    topics: HashMap<String, TopicLease>,
}

impl LeaseSchedule {
    /// The schedule of producer `id` whose leases last `lease_ms`.
    #[must_use]
    pub fn new(id: ProducerId, lease_ms: u64) -> Self {
        Self {
            id,
            lease_ms,
            topics: HashMap::new(),
        }
    }

    /// The producer's id.
    #[must_use]
    pub fn id(&self) -> &ProducerId {
        &self.id
    }

    /// Whether `topic` has a lease already.
    #[must_use]
    pub fn contains(&self, topic: &str) -> bool {
        self.topics.contains_key(topic)
    }

    fn expiry(&self, now_ms: u64) -> u64 {
        now_ms.saturating_add(self.lease_ms)
    }

    /// The lease to write for `topic` at registration: consumers need not wait for this producer's
    /// markers of epochs `<= first_epoch`. Not in the schedule until [`LeaseSchedule::registered`]
    /// (after the write succeeded).
    #[must_use]
    pub fn new_lease(&self, topic: &str, first_epoch: u64, now_ms: u64) -> Lease {
        Lease {
            producer: self.id.clone(),
            topic: topic.to_owned(),
            first_epoch,
            lease_ms: self.lease_ms,
            expires_at_ms: self.expiry(now_ms),
            closed_at_epoch: None,
        }
    }

    /// `lease` (from [`LeaseSchedule::new_lease`]) is in the log: its topic's epochs up to its
    /// first epoch count as announced.
    pub fn registered(&mut self, lease: Lease) {
        let announced = lease.first_epoch;
        self.topics
            .insert(lease.topic.clone(), TopicLease { lease, announced });
    }

    /// The markers due: every leased topic whose epoch in effect (`epoch_in_effect`, `None`: no
    /// assignment in effect) is above the last epoch announced. If epochs came faster than
    /// markers, intermediate ones are skipped: a marker of `G` covers every epoch below it.
    pub fn due(&self, epoch_in_effect: impl Fn(&str) -> Option<u64>) -> Vec<(String, u64)> {
        let mut due: Vec<(String, u64)> = self
            .topics
            .iter()
            .filter_map(|(t, l)| {
                let e = epoch_in_effect(t)?;
                (e > l.announced).then(|| (t.clone(), e))
            })
            .collect();
        due.sort();
        due
    }

    /// The marker of `epoch` on `topic` is in the log: its epochs count as announced (the lease
    /// itself need not change: the marker has its own key).
    pub fn marker_written(&mut self, topic: &str, epoch: u64) {
        if let Some(entry) = self.topics.get_mut(topic) {
            entry.announced = entry.announced.max(epoch);
        }
    }

    /// The highest epoch of `topic` this producer announced (its first epoch at registration,
    /// then its latest marker); `None` for a topic without lease.
    #[must_use]
    pub fn announced(&self, topic: &str) -> Option<u64> {
        self.topics.get(topic).map(|l| l.announced)
    }

    /// Every lease, renewed at `now_ms` (to write every third of the lease duration).
    pub fn renew(&mut self, now_ms: u64) -> Vec<Lease> {
        let expires = self.expiry(now_ms);
        self.topics
            .values_mut()
            .map(|l| {
                l.lease.expires_at_ms = expires;
                l.lease.clone()
            })
            .collect()
    }

    /// Every lease, renewed and marked closed at its last announced epoch (a clean close:
    /// consumers stop waiting for this producer for newer epochs at once).
    pub fn close(&mut self, now_ms: u64) -> Vec<Lease> {
        for l in self.topics.values_mut() {
            l.lease.closed_at_epoch = Some(l.announced);
        }
        self.renew(now_ms)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn schedule() -> LeaseSchedule {
        LeaseSchedule::new(ProducerId::parse(&"a".repeat(32)).unwrap(), 10_000)
    }

    #[test]
    fn markers_are_due_above_the_first_and_last_announced_epoch() {
        let mut s = schedule();
        let lease = s.new_lease("orders", 3, 1_000);
        assert_eq!(lease.expires_at_ms, 11_000);
        assert!(!s.contains("orders"));
        s.registered(lease);
        s.registered(s.new_lease("clicks", 0, 1_000));
        let in_effect = |t: &str| match t {
            "orders" => Some(3),
            "clicks" => Some(5),
            _ => None,
        };
        // orders: epoch 3 is its first epoch, nothing due; clicks: 5 > 0.
        assert_eq!(s.due(in_effect), [("clicks".to_owned(), 5)]);
        s.marker_written("clicks", 5);
        assert_eq!(s.announced("clicks"), Some(5));
        assert!(s.due(in_effect).is_empty());
        // Skipped epochs: in effect 8 after 5, one marker of 8.
        assert_eq!(
            s.due(|t| (t == "clicks").then_some(8)),
            [("clicks".to_owned(), 8)]
        );
        // An older marker does not lower what was announced; unknown topics are ignored.
        s.marker_written("clicks", 4);
        assert_eq!(s.announced("clicks"), Some(5));
        s.marker_written("unknown", 1);
        assert_eq!(s.announced("unknown"), None);
    }

    #[test]
    fn renew_and_close_extend_every_lease_and_close_at_the_announced_epoch() {
        let mut s = schedule();
        s.registered(s.new_lease("orders", 2, 0));
        s.registered(s.new_lease("clicks", 0, 0));
        s.marker_written("clicks", 4);
        let renewed = s.renew(5_000);
        assert_eq!(renewed.len(), 2);
        assert!(renewed.iter().all(|l| l.expires_at_ms == 15_000));
        assert!(renewed.iter().all(|l| l.closed_at_epoch.is_none()));
        let mut closed = s.close(6_000);
        closed.sort_by(|a, b| a.topic.cmp(&b.topic));
        assert_eq!(closed[0].topic, "clicks");
        assert_eq!(closed[0].closed_at_epoch, Some(4));
        assert_eq!(closed[1].closed_at_epoch, Some(2));
        assert!(closed.iter().all(|l| l.expires_at_ms == 16_000));
    }
}
