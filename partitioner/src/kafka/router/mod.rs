//! The routing state shared by every producer flavour: [`DkgRouter`] (its docs: the hot path) and
//! its parts (state, followers, adapters, builder). Reached as `dkg_partitioner::DkgRouter`.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use prometheus::{IntCounter, Registry};
use rdkafka::ClientContext;
use rdkafka::client::Client;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, StreamConsumer};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::producer::{
    BaseProducer, BaseRecord, DeliveryResult, FutureProducer, Partitioner, Producer,
    ProducerContext, ThreadedProducer,
};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::util::{AsyncRuntime, IntoOpaque};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::assignment::{Assignment, Route};
use crate::error::{Error, Result};
use crate::hash::kafka_partition;
use crate::kafka::DEFAULT_STARTUP_TIMEOUT;
use crate::kafka::control::{self, ControlTopicReader, ControlUpdate, DEFAULT_CONTROL_TOPIC};
use crate::kafka::metrics::{OTHER_TOPIC, ProducerMetrics, RouteCounters, TopicStatus};
use crate::kafka::topic::{self, duration_millis};
use dkg_protocol::headers;
use dkg_protocol::window::OpenWindow;

pub use dkg_protocol::headers::EPOCH_HEADER;

mod adapters;
mod builder;
mod followers;
mod state;

pub use self::adapters::{DkgPartitioner, DkgProducerContext, PartitionCountSource};
pub(crate) use self::builder::router_setters;
pub use self::builder::{DkgRouterBuilder, RouterConfig};
use self::followers::{
    follow_control_topic, follow_partition_counts, known_partitions, refresh_counts,
};
use self::state::{Shared, TopicMap};

/// Which rule placed a keyed record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RouteKind {
    /// The key is a heavy hitter of the current assignment.
    Heavy,
    /// The key went through the current assignment's bucket table.
    Bucket,
    /// The key is a split heavy key of the current assignment (spec 4.6): spread over its parts.
    Split,
    /// No assignment in effect: Kafka's default placement, `toPositive(murmur2(key)) % partitions`
    /// (identical to the Java producer).
    Fallback,
}

impl RouteKind {
    /// The `route` metric label.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            RouteKind::Heavy => "heavy",
            RouteKind::Bucket => "bucket",
            RouteKind::Split => "split",
            RouteKind::Fallback => "fallback",
        }
    }
}

/// Where a keyed record goes, as decided by [`DkgRouter::route`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Routing {
    /// The partition to set on the record. `None` only while the topic's partition count is not
    /// known yet (first records to a topic): leave the record to librdkafka's partitioner, which
    /// the DKG builders default to `murmur2_random`, the Java producer's placement.
    pub partition: Option<i32>,
    /// Epoch of the assignment that chose the partition; `None` for fallback placement.
    pub epoch: Option<u64>,
    /// Which rule decided.
    pub route: RouteKind,
    /// The key's partition changed in this producer's latest epoch transition (from the previous
    /// assignment, or from Kafka's default placement when there was none), which is still
    /// current. Computed only by routers built with
    /// [`DkgRouterBuilder::track_moved_keys`]; always `false` otherwise, and for fallback
    /// placement. The producer stamps headers on such records only (see
    /// [`EpochHeader::Moved`](crate::EpochHeader::Moved)).
    pub moved: bool,
}

impl Routing {
    const UNPLACED: Routing = Routing {
        partition: None,
        epoch: None,
        route: RouteKind::Fallback,
        moved: false,
    };

    /// `headers` with the [`EPOCH_HEADER`] appended when an assignment placed the record, unless
    /// it is a split key's (those are never stamped, `docs/spec.md` 4.6).
    #[must_use]
    pub fn stamp(&self, headers: Option<OwnedHeaders>) -> Option<OwnedHeaders> {
        match self.epoch {
            Some(epoch) if self.route != RouteKind::Split => Some(stamp_epoch(headers, epoch)),
            _ => headers,
        }
    }

    /// Apply this routing to a [`BaseRecord`] (for `BaseProducer`/`ThreadedProducer` users):
    /// sets the partition and stamps the epoch header. Use it only on records without an explicit
    /// partition.
    #[must_use]
    pub fn apply<'a, K, P, D>(&self, mut record: BaseRecord<'a, K, P, D>) -> BaseRecord<'a, K, P, D>
    where
        K: rdkafka::message::ToBytes + ?Sized,
        P: rdkafka::message::ToBytes + ?Sized,
        D: IntoOpaque,
    {
        if let Some(p) = self.partition {
            record.partition = Some(p);
        }
        record.headers = self.stamp(record.headers.take());
        record
    }
}

/// Append the [`EPOCH_HEADER`] (decimal ASCII) to `headers`.
#[must_use]
pub fn stamp_epoch(headers: Option<OwnedHeaders>, epoch: u64) -> OwnedHeaders {
    let mut buf = [0_u8; 20];
    let digits = headers::encode_decimal(epoch, &mut buf);
    headers
        .unwrap_or_else(|| OwnedHeaders::new_with_capacity(1))
        .insert(Header {
            key: EPOCH_HEADER,
            value: Some(digits),
        })
}

/// The epoch stamped on a record: its last well-formed [`EPOCH_HEADER`], if any (the rule
/// `DkgConsumer` reads records by).
#[must_use]
pub fn epoch_of<H: Headers>(headers: &H) -> Option<u64> {
    headers::epoch_of(headers.iter().map(|h| (h.key, h.value)))
}

/// Aborts the background tasks when the last router handle is dropped.
struct TaskGuard(Vec<JoinHandle<()>>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// The routing state shared by every producer flavour: per-topic assignment and partition count,
/// kept current by two background tasks, and the lock-free lookup on the hot path.
///
/// Hot path ([`DkgRouter::route`]): one `ArcSwap` load for the topic map, a hash lookup, one load for
/// the topic's partition view, one for its assignment, the O(1) [`Assignment::route`], two atomic
/// counter increments. No lock, no allocation (except the first record of a topic never seen before,
/// which registers it), no I/O, no panic.
///
/// The DKG routing state of one process: follows the control topic and the data topics' partition
/// counts in the background and answers "which partition for this key?" without blocking.
///
/// [`DkgProducer`](crate::DkgProducer) contains one. Use it directly with a
/// `BaseProducer`/`ThreadedProducer`: [`DkgRouter::route`] + [`Routing::apply`] on each record
/// (explicit partition + epoch header), or [`DkgRouter::partitioner`] as librdkafka's custom
/// partitioner (no header). Cheap to clone; the background tasks stop when the last clone (or
/// partitioner) is dropped.
#[derive(Clone)]
pub struct DkgRouter {
    shared: Arc<Shared>,
    _tasks: Arc<TaskGuard>,
}

impl fmt::Debug for DkgRouter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DkgRouter")
            .field("control_topic", &self.shared.control_topic)
            .field("topics", &self.shared.topics.load().len())
            .finish_non_exhaustive()
    }
}

impl DkgRouter {
    /// A builder; `config` supplies the connection settings (bootstrap servers, security), see
    /// [`control::connection_config`].
    #[must_use]
    pub fn builder(config: ClientConfig) -> DkgRouterBuilder {
        DkgRouterBuilder::new(config)
    }

    /// The partition (and epoch) for a keyed record to `topic`. Never blocks, never panics; a
    /// returned partition always exists in the topic's latest known metadata.
    #[inline]
    pub fn route(&self, topic: &str, key: &[u8]) -> Routing {
        let map = self.shared.topics.load();
        if let Some(state) = map.get(topic) {
            let routes = self.shared.use_topic(state, true);
            let view = state.view.load();
            return state.route(key, view.count, &view, routes, self.shared.track_moves);
        }
        drop(map);
        let state = self.shared.topic(topic);
        let routes = self.shared.use_topic(&state, true);
        let view = state.view.load();
        state.route(key, view.count, &view, routes, self.shared.track_moves)
    }

    /// Like [`DkgRouter::route`] with the partition count librdkafka reported (custom partitioner
    /// path). Always returns a partition in `0..partition_count` (0 if `partition_count <= 0`).
    #[inline]
    pub fn route_with_count(&self, topic: &str, key: &[u8], partition_count: i32) -> Routing {
        let Ok(count) = u32::try_from(partition_count) else {
            return Routing {
                partition: Some(0),
                ..Routing::UNPLACED
            };
        };
        if count == 0 {
            return Routing {
                partition: Some(0),
                ..Routing::UNPLACED
            };
        }
        let map = self.shared.topics.load();
        if let Some(state) = map.get(topic) {
            let routes = self.shared.use_topic(state, true);
            let view = state.view.load();
            return state.route(key, count, &view, routes, self.shared.track_moves);
        }
        drop(map);
        let state = self.shared.topic(topic);
        let routes = self.shared.use_topic(&state, true);
        let view = state.view.load();
        state.route(key, count, &view, routes, self.shared.track_moves)
    }

    /// The assignment currently adopted for `topic` (in effect only while its partition count
    /// matches the topic's).
    #[must_use]
    pub fn assignment(&self, topic: &str) -> Option<Arc<Assignment>> {
        self.shared
            .topics
            .load()
            .get(topic)
            .and_then(|s| s.assignment.load_full())
    }

    /// The latest known partition count of `topic` (`None` until fetched).
    #[must_use]
    pub fn partition_count(&self, topic: &str) -> Option<u32> {
        self.shared
            .topics
            .load()
            .get(topic)
            .map(|s| s.view.load().count)
            .filter(|&c| c != 0)
    }

    /// The control topic followed.
    #[must_use]
    pub fn control_topic(&self) -> &str {
        &self.shared.control_topic
    }

    /// Whether stamp windows are tracked (an ordering producer with `EpochHeader::Moved`).
    pub(crate) fn tracks_windows(&self) -> bool {
        self.shared.track_windows
    }

    /// The open stamp windows of `topic`, oldest first.
    #[cfg(test)]
    pub(crate) fn open_windows(&self, topic: &str) -> Vec<OpenWindow> {
        self.shared
            .topics
            .load()
            .get(topic)
            .and_then(|s| s.transition.load().as_deref().map(|t| t.open.clone()))
            .unwrap_or_default()
    }

    /// Every topic with open stamp windows (any topic of the control topic, in use or not), with
    /// them, oldest first.
    pub(crate) fn windows_by_topic(&self) -> Vec<(String, Vec<OpenWindow>)> {
        self.shared
            .topics
            .load()
            .values()
            .filter_map(|s| {
                let t = s.transition.load();
                let open = &t.as_deref()?.open;
                (!open.is_empty()).then(|| (s.name.to_string(), open.clone()))
            })
            .collect()
    }

    /// Close the stamp windows of `topic` up to epoch `upto`, counted under `reason`; nothing if
    /// no window of `upto` is open any more (a retraction or a reset came in between).
    pub(crate) fn close_windows(&self, topic: &str, upto: u64, reason: &str) {
        let Some(state) = self.shared.topics.load().get(topic).cloned() else {
            return;
        };
        let mut closed = false;
        state.transition.rcu(|current| match current.as_deref() {
            Some(t) if t.is_open(upto) => {
                closed = true;
                Some(Arc::new(t.closed_upto(upto)))
            }
            _ => {
                closed = false;
                Option::clone(current)
            }
        });
        if closed {
            self.shared.metrics.windows_closed(topic, reason);
        }
    }

    /// A receiver that changes after every adoption or retraction of an assignment (any topic).
    #[must_use]
    pub fn adoptions(&self) -> watch::Receiver<u64> {
        self.shared.adoptions.subscribe()
    }

    /// Topics records were routed to (or declared with [`DkgRouterBuilder::topics`]).
    #[must_use]
    pub fn topics_in_use(&self) -> Vec<String> {
        self.shared
            .topics
            .load()
            .values()
            .filter(|s| s.in_use.load(Ordering::Acquire))
            .map(|s| s.name.to_string())
            .collect()
    }

    /// An rdkafka [`Partitioner`] backed by this router, for `BaseProducer`/`ThreadedProducer`
    /// (not honoured by `FutureProducer`).
    #[must_use]
    pub fn partitioner(&self) -> DkgPartitioner {
        DkgPartitioner {
            router: self.clone(),
        }
    }

    /// A ready-made [`ProducerContext`] that installs [`DkgRouter::partitioner`], for
    /// `ThreadedProducer::from_config_and_context` / `BaseProducer::from_config_and_context`.
    #[must_use]
    pub fn producer_context(&self) -> DkgProducerContext {
        DkgProducerContext {
            partitioner: self.partitioner(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;

    use super::state::{Before, Transition};
    use super::*;
    use dkg_core::fixtures;

    #[test]
    fn router_config_debug_shows_no_secret_of_the_control_consumer() {
        let mut c = ClientConfig::new();
        c.set("sasl.password", "hunter2")
            .set("ssl.key.pem", "-----BEGIN KEY-----");
        let config = RouterConfig {
            control_consumer_config: Some(c),
            ..RouterConfig::default()
        };
        let shown = format!("{config:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("BEGIN KEY"),
            "{shown}"
        );
        assert!(shown.contains("ssl.key.pem"), "the keys are shown: {shown}");
    }

    /// A router with no background tasks: state is set by hand.
    fn detached() -> DkgRouter {
        detached_with(false)
    }

    fn detached_with(track_windows: bool) -> DkgRouter {
        let (tx, _rx) = mpsc::unbounded_channel();
        DkgRouter {
            shared: Arc::new(Shared {
                control_topic: "ctl".to_owned(),
                topics: ArcSwap::from_pointee(TopicMap::default()),
                metrics: ProducerMetrics::new().unwrap(),
                metadata_requests: tx,
                keyless: AtomicU32::new(0),
                track_moves: true,
                track_windows,
                adoptions: watch::Sender::new(0),
            }),
            _tasks: Arc::new(TaskGuard(Vec::new())),
        }
    }

    fn assignment(topic: &str, partitions: u32, epoch: u64, table: Vec<u32>) -> Arc<Assignment> {
        let hot: &[u8] = b"hot";
        Arc::new(fixtures::assignment(
            topic,
            partitions,
            epoch,
            table,
            &[(hot, partitions - 1, 10)],
        ))
    }

    fn set_state(r: &DkgRouter, topic: &str, count: u32, a: Option<Arc<Assignment>>) {
        let state = r.shared.topic(topic);
        state.set_partition_count(count, &r.shared.metrics);
        state.transition.store(
            a.as_ref()
                .map(|a| Arc::new(Transition::new(a.epoch(), Before::Unknown))),
        );
        state.assignment.store(a);
    }

    #[test]
    fn route_table() {
        let r = detached();
        let four = assignment("t", 4, 3, vec![1, 1, 1, 1]);
        let eight = assignment("t", 8, 4, vec![5; 8]);
        let fallback = |key: &[u8], n: u32| Routing {
            partition: Some(kafka_partition(key, n) as i32),
            epoch: None,
            route: RouteKind::Fallback,
            moved: false,
        };
        // (partition count known, assignment, key, expected)
        type Case<'a> = (u32, Option<Arc<Assignment>>, &'a [u8], Routing);
        let cases: Vec<Case<'_>> = vec![
            (0, None, b"k", Routing::UNPLACED),
            (0, Some(Arc::clone(&four)), b"k", Routing::UNPLACED),
            (4, None, b"k", fallback(b"k", 4)),
            (4, None, b"", fallback(b"", 4)),
            (
                4,
                Some(Arc::clone(&four)),
                b"k",
                Routing {
                    partition: Some(1),
                    epoch: Some(3),
                    route: RouteKind::Bucket,
                    moved: false,
                },
            ),
            (
                4,
                Some(Arc::clone(&four)),
                b"hot",
                Routing {
                    partition: Some(3),
                    epoch: Some(3),
                    route: RouteKind::Heavy,
                    moved: false,
                },
            ),
            (8, Some(Arc::clone(&four)), b"k", fallback(b"k", 8)),
            (4, Some(Arc::clone(&eight)), b"hot", fallback(b"hot", 4)),
            (
                8,
                Some(Arc::clone(&eight)),
                b"k",
                Routing {
                    partition: Some(5),
                    epoch: Some(4),
                    route: RouteKind::Bucket,
                    moved: false,
                },
            ),
        ];
        for (count, a, key, want) in cases {
            set_state(&r, "t", count, a.clone());
            assert_eq!(
                r.route("t", key),
                want,
                "count {count} epoch {:?}",
                a.map(|a| a.epoch())
            );
        }
    }

    #[test]
    fn moved_keys_follow_the_latest_transition() {
        let r = detached();
        assert!(
            r.open_windows("t").is_empty(),
            "untracked routers keep no windows"
        );
        set_state(&r, "t", 4, None);
        let shared = &r.shared;
        let adopt = |a: Arc<Assignment>, live: bool| shared.apply(&ControlUpdate::Adopted(a), live);
        let moved = |key: &[u8]| r.route("t", key).moved;
        // First assignment read at start-up: predecessor unknown, nothing moved.
        adopt(assignment("t", 4, 1, vec![1; 4]), false);
        assert!(!moved(b"k") && !moved(b"hot"));
        // Live: the table moves every bucket from 1 to 2; the heavy key stays on 3.
        adopt(assignment("t", 4, 2, vec![2; 4]), true);
        assert!(moved(b"k"), "bucket keys moved 1 -> 2");
        assert!(!moved(b"hot"), "hot stays on 3");
        let mut rx = r.adoptions();
        rx.mark_unchanged();
        adopt(assignment("t", 4, 3, vec![2; 4]), true);
        assert!(rx.has_changed().unwrap());
        assert!(!moved(b"k"), "epoch 3 moved nothing");
        // A transition recorded for another epoch than the one loaded: counted as moved.
        r.shared
            .topic("t")
            .transition
            .store(Some(Arc::new(Transition::new(9, Before::Unknown))));
        assert!(moved(b"k"));
        // After a retraction, live adoption comes from Kafka's default placement.
        shared.apply(&ControlUpdate::Retracted { topic: "t".into() }, true);
        assert!(!moved(b"k"), "fallback never counts as moved");
        adopt(assignment("t", 4, 1, vec![0; 4]), true);
        assert_eq!(moved(b"k"), kafka_partition(b"k", 4) != 0);
        assert!(r.topics_in_use().contains(&"t".to_owned()));
        // A key split in the previous epoch counts as moved when whole again, even on the
        // partition of its first part (its records were on every part).
        let mut parts = assignment("t", 4, 2, vec![0; 4])
            .as_ref()
            .clone()
            .into_parts();
        parts.heavy[0].split = vec![
            crate::assignment::SplitPart {
                partition: 3,
                weight: 1,
            },
            crate::assignment::SplitPart {
                partition: 1,
                weight: 1,
            },
        ];
        adopt(Arc::new(Assignment::new(parts).unwrap()), true);
        // Split records: never moved, never stamped, spread over the parts.
        let routed: Vec<Routing> = (0..4).map(|_| r.route("t", b"hot")).collect();
        assert!(
            routed
                .iter()
                .all(|x| x.route == RouteKind::Split && !x.moved)
        );
        assert!(routed.iter().all(|x| x.stamp(None).is_none()));
        let mut spread: Vec<i32> = routed.iter().filter_map(|x| x.partition).collect();
        spread.sort_unstable();
        assert_eq!(spread, vec![1, 1, 3, 3]);
        adopt(assignment("t", 4, 3, vec![0; 4]), true);
        assert!(moved(b"hot"), "whole again on 3 after split over 3 and 1");
        assert!(!moved(b"k"), "bucket keys stayed on 0");
        adopt(assignment("t", 4, 4, vec![0; 4]), true);
        assert!(!moved(b"hot"), "whole in both");
    }

    #[test]
    fn tracked_windows_keep_moved_keys_stamped_until_closed_in_order() {
        let r = detached_with(true);
        set_state(&r, "t", 4, None);
        let shared = &r.shared;
        let adopt = |epoch: u64, bucket: u32| {
            let a = assignment("t", 4, epoch, vec![bucket; 4]);
            shared.apply(&ControlUpdate::Adopted(a), true);
        };
        let moved = |key: &[u8]| r.route("t", key).moved;
        let w = |epoch: u64, prev: u64| OpenWindow { epoch, prev };
        shared.apply(
            &ControlUpdate::Adopted(assignment("t", 4, 1, vec![1; 4])),
            false,
        );
        assert!(
            moved(b"k") && moved(b"hot"),
            "tracked: inside the start-up window every key counts as moved"
        );
        assert_eq!(r.open_windows("t"), vec![w(1, 0)]);
        r.close_windows("t", 1, "settled");
        assert!(r.open_windows("t").is_empty());
        assert!(
            !moved(b"k") && !moved(b"hot"),
            "no window open: nothing stamped"
        );
        // Epoch 2 moves the bucket keys 1 -> 2; epoch 3 moves nothing, but 2's window is open.
        adopt(2, 2);
        adopt(3, 2);
        assert_eq!(r.open_windows("t"), vec![w(2, 1), w(3, 2)]);
        assert!(moved(b"k"), "moved by 2, whose window is open");
        assert!(!moved(b"hot"), "the heavy key stays on 3 throughout");
        // Closing the older window leaves epoch 3's stamps as they were (a key stamped in an
        // epoch stays stamped until that epoch's window closes); closing 3 clears them.
        r.close_windows("t", 2, "settled");
        assert_eq!(r.open_windows("t"), vec![w(3, 2)]);
        assert!(moved(b"k"));
        r.close_windows("t", 3, "settled");
        assert!(!moved(b"k"));
        // An epoch adopted after the windows closed compares with its predecessor only.
        adopt(4, 2);
        assert!(!moved(b"k"));
        // More placements to compare than kept: every record counts as moved until they close.
        for epoch in 5..=12 {
            adopt(epoch, 2);
        }
        assert_eq!(r.open_windows("t").len(), 9);
        assert!(moved(b"hot"));
        assert_eq!(
            r.windows_by_topic(),
            vec![("t".to_owned(), r.open_windows("t"))]
        );
        r.close_windows("t", 12, "settled");
        assert!(!moved(b"hot") && !moved(b"k"));
        assert!(r.open_windows("t").is_empty());
        assert!(r.open_windows("other").is_empty());
        assert!(r.windows_by_topic().is_empty());
        // An epoch that skips one (13 never adopted here): every key counts as moved.
        adopt(14, 2);
        assert!(moved(b"hot") && moved(b"k"));
        // A window no longer open (closed already) is not closed again, nor counted.
        r.close_windows("t", 14, "settled");
        r.close_windows("t", 14, "settled");
        assert!(!moved(b"k"));
        // After a retraction the next epoch comes from Kafka's placement, but other producers
        // may have adopted epochs this one did not: every key counts as moved.
        shared.apply(&ControlUpdate::Retracted { topic: "t".into() }, true);
        adopt(20, 2);
        assert!(moved(b"hot") && moved(b"k"));
        // Windows that never close stay bounded (and stamp every key).
        for epoch in 21..=120 {
            adopt(epoch, 2);
        }
        assert_eq!(r.open_windows("t").len(), 64);
        assert_eq!(r.open_windows("t").last().map(|w| w.epoch), Some(120));
        assert!(moved(b"k"));
    }

    #[test]
    fn unknown_topic_is_registered_and_left_to_librdkafka() {
        let r = detached();
        assert_eq!(r.route("new", b"k"), Routing::UNPLACED);
        assert!(r.shared.topics.load().contains_key("new"));
        assert!(r.shared.topics.load()["new"].in_use.load(Ordering::Relaxed));
        assert_eq!(r.partition_count("new"), None);
    }

    #[test]
    fn partitioner_always_returns_a_valid_partition() {
        let r = detached();
        set_state(&r, "t", 4, Some(assignment("t", 4, 1, vec![2; 4])));
        let p = r.partitioner();
        assert_eq!(p.partition("t", Some(b"k"), 4, |_| true), 2);
        // librdkafka's count wins over the router's: assignment for 4, topic now has 6.
        assert_eq!(
            p.partition("t", Some(b"k"), 6, |_| true),
            kafka_partition(b"k", 6) as i32
        );
        assert_eq!(p.partition("t", Some(b"k"), 0, |_| true), 0);
        assert_eq!(p.partition("t", Some(b"k"), -3, |_| true), 0);
        let keyless: Vec<i32> = (0..8)
            .map(|_| p.partition("t", None, 3, |_| true))
            .collect();
        assert!(keyless.iter().all(|&x| (0..3).contains(&x)));
        assert!(
            (0..3).all(|x| keyless.contains(&x)),
            "round-robin {keyless:?}"
        );
    }

    #[test]
    fn counters_follow_routes_and_partitions() {
        let r = detached();
        set_state(&r, "t", 4, Some(assignment("t", 4, 1, vec![2; 4])));
        for _ in 0..3 {
            r.route("t", b"k");
        }
        r.route("t", b"hot");
        let state = Arc::clone(&r.shared.topics.load()["t"]);
        let routes = state.routes.get().unwrap();
        assert_eq!(routes.bucket.get(), 3);
        assert_eq!(routes.heavy.get(), 1);
        let view = state.view.load();
        assert_eq!(view.counters[2].get(), 3);
        assert_eq!(view.counters[3].get(), 1);
        // Growing keeps the existing counters (no lost counts) and adds new ones.
        state.set_partition_count(6, &r.shared.metrics);
        let grown = state.view.load();
        assert_eq!(grown.counters.len(), 6);
        assert_eq!(grown.counters[2].get(), 3);
        let s = state.status();
        assert_eq!((s.epoch, s.in_effect), (1, false));
    }

    proptest! {
        #[test]
        fn route_never_names_a_missing_partition(
            key in proptest::collection::vec(any::<u8>(), 0..40),
            count in 0_u32..40,
            assigned in 1_u32..40,
            with_assignment in any::<bool>(),
        ) {
            let r = detached();
            let a = with_assignment
                .then(|| assignment("t", assigned, 1, (0..assigned).collect()));
            set_state(&r, "t", count, a);
            let routing = r.route("t", &key);
            match routing.partition {
                None => prop_assert_eq!(count, 0),
                Some(p) => prop_assert!(p >= 0 && (p as u32) < count),
            }
            let p = r.route_with_count("t", &key, count as i32).partition;
            prop_assert!(p.is_some_and(|p| p >= 0 && (p as u32) < count.max(1)));
        }
    }

    #[test]
    fn stamped_epoch_reads_back() {
        let h = stamp_epoch(None, 42);
        assert_eq!(epoch_of(&h), Some(42));
        let h = OwnedHeaders::new().insert(Header {
            key: "other",
            value: Some("x"),
        });
        assert_eq!(epoch_of(&h), None);
        let h = stamp_epoch(Some(h), 9);
        assert_eq!(epoch_of(&h), Some(9));
        assert_eq!(h.count(), 2);
        // The last well-formed value wins; signs and junk are not epochs.
        let h = stamp_epoch(None, 1).insert(Header {
            key: EPOCH_HEADER,
            value: Some("x"),
        });
        assert_eq!(epoch_of(&h), Some(1));
        let h = OwnedHeaders::new().insert(Header {
            key: EPOCH_HEADER,
            value: Some("+5"),
        });
        assert_eq!(epoch_of(&h), None);
    }
}
