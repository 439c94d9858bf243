//! The consumer driver: [`DkgConsumer`] (its docs: the protocol's pointer, cost, bounded
//! buffering, offsets) and its parts, split by responsibility (builder, context and callbacks, the
//! consuming loop, commits, followers). Reached as `dkg_kafka::DkgConsumer`.

mod builder;
mod commits;
mod context;
mod driver;
mod followers;
mod hooks;
mod message;
mod metrics;

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use prometheus::Registry;
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, StreamConsumer};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::statistics::Statistics;
use rdkafka::types::{RDKafkaErrorCode, RDKafkaRespErr};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{debug, error, info, warn};

use crate::assignment::Assignment;
use crate::error::{Error, Result};
use crate::kafka::control::{self, ControlTopicReader, ControlUpdate, DEFAULT_CONTROL_TOPIC};
use crate::kafka::handoff::{
    self, DEFAULT_HANDOFF_TOPIC, HandoffEntry, HandoffKey, HandoffReader, HandoffWriter,
};

use crate::kafka::DEFAULT_STARTUP_TIMEOUT;
use crate::kafka::topic::{self, duration_millis};

use dkg_kafka_protocol::consumer::Monotonic;
use dkg_kafka_protocol::consumer::core::{Core, CoreConfig, Incoming, Outcome, Snapshot};
use dkg_kafka_protocol::consumer::lane::Lanes;
use dkg_kafka_protocol::consumer::progress::CommitMeta;

pub use self::hooks::{ConsumerHooks, EpochChange, NoHooks, SplitChange};
use self::message::DkgHeaders;
pub use self::message::{DkgMessage, DkgRecord};
use self::metrics::ConsumerMetrics;

pub use self::builder::{ConsumerConfig, DkgConsumerBuilder, uses_consumer_group_protocol};
pub use self::context::DkgContext;
use self::context::{Note, Shared};
use self::driver::Inner;
use self::followers::{BgEvent, apply, follow_control, follow_handoff};

/// Default [`DkgConsumerBuilder::max_held_records`].
pub const DEFAULT_MAX_HELD_RECORDS: usize = 10_000;

/// Longest [`DkgConsumer::close`] waits for librdkafka to leave the group.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest [`DkgConsumer::close`] waits for the final revocation after unsubscribing.
const UNSUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the consumer re-evaluates leases, flow control and gauges.
const HOUSEKEEPING: Duration = Duration::from_millis(100);

/// Records between two housekeeping checks on a busy consumer.
const HOUSEKEEPING_EVERY: u32 = 256;

/// How often the member owning partition 0 garbage-collects the handoff topic.
const GC_EVERY: Duration = Duration::from_secs(60);

/// Aborts background tasks on drop.
struct Tasks(Vec<JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// A Kafka consumer (group member) of one topic that keeps key grouping exact across DKG epoch
/// switches.
///
/// The protocol (the problem, the rules for producers and consumers, why it cannot deadlock, and
/// the guarantee) is specified in [`dkg_kafka_protocol::consumer`], beside the pure state machine that
/// implements it; this module is the driver that moves records between rdkafka and that state
/// machine. The layering is in `docs/architecture.md`.
///
/// # Split keys
///
/// A key the assignment splits over several partitions (`docs/spec.md` 4.6) keeps key grouping
/// only against its whole records: its whole records before a split are processed before its
/// split ones, and its split ones before its whole ones after the split (the transitions wait
/// like a moved key's). **Across a split key's parts, order is not guaranteed**, and several
/// members process the key at once. [`DkgMessage::split_parts`] marks its records,
/// [`ConsumerHooks::on_split_change`] reports the transitions; keep partial state per partition
/// for split keys and merge it downstream (`examples/split_aggregates/`). The rule, and where
/// the consumer cannot tell: `docs/spec.md` 9.3, rules C14 to C18.
///
/// # Cost
///
/// With no epoch change, records are handed out at once. [`DkgConsumer::recv_borrowed`] copies
/// nothing (the record borrows the consumer, like `StreamConsumer::recv`); [`DkgConsumer::recv`]
/// returns an owned copy, whose allocation per record is most of its cost (`BENCHMARKS.md`).
/// A record of a quiet partition (nothing of it held, no released record waiting, no skip rule of
/// a previous owner left) without an epoch or with an epoch already settled skips the protocol's
/// state entirely: no lock, no lookup, no clock, one atomic load and one store (`lane.rs`);
/// metrics are counted locally and flushed at housekeeping. Everything else (records during a
/// switch, markers waiting for the position) goes through the locked state machine (`core.rs`).
///
/// # Bounded buffering
///
/// A partition holding more than [`max_held_records`](DkgConsumerBuilder::max_held_records) is
/// paused until half of them are released. If a paused partition releases nothing for
/// [`stall_timeout`](DkgConsumerBuilder::stall_timeout) it is resumed anyway and may exceed the
/// limit: a cycle of paused partitions (two partitions swapping keys while a slow producer's
/// marker ends lie behind both pause points) would otherwise wait forever (`docs/spec.md` 9.3,
/// C13).
///
/// # Offsets
///
/// `enable.auto.commit=false`: the wrapper commits (offset = lowest unprocessed, metadata =
/// passed map, within the broker's `offset.metadata.max.bytes`, default 4096 B: about 70
/// concurrent producers per topic) every [`commit_interval`](DkgConsumerBuilder::commit_interval),
/// on [`commit`](DkgConsumer::commit), on every drained change (synchronously), on revocation and
/// on close. Do not commit through other means.
///
/// ```no_run
/// # async fn run() -> dkg_kafka::Result<()> {
/// use dkg_kafka::DkgConsumer;
/// use rdkafka::ClientConfig;
///
/// let mut config = ClientConfig::new();
/// config.set("bootstrap.servers", "127.0.0.1:9092");
/// let mut consumer = DkgConsumer::builder(config)
///     .topic("orders")
///     .group("billing")
///     .build()
///     .await?;
/// loop {
///     let record = consumer.recv().await?;
///     // process `record`; it counts as processed when recv is called again
/// #   let _ = record;
/// }
/// # }
/// ```
pub struct DkgConsumer {
    /// The fetching handle: records handed out by [`DkgConsumer::recv_borrowed`] borrow it.
    consumer: Arc<StreamConsumer<DkgContext>>,
    inner: Inner,
}

impl fmt::Debug for DkgConsumer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DkgConsumer")
            .field("topic", &self.inner.topic)
            .field("group", &self.inner.group)
            .field("member", &self.inner.member)
            .finish_non_exhaustive()
    }
}

impl DkgConsumer {
    /// A builder from the user's consumer `config` (bootstrap servers, security, `group.id`,
    /// `auto.offset.reset`, ...). See [`DkgConsumerBuilder::build`] for what the wrapper sets.
    #[must_use]
    pub fn builder(config: ClientConfig) -> DkgConsumerBuilder {
        DkgConsumerBuilder::new(config)
    }

    /// The next record for the application, as an owned copy. The record returned by the
    /// previous call counts as processed from now on. Held
    /// records come out when their key's old partitions are drained. Errors are the client's
    /// (transient ones included, as with `StreamConsumer::recv`); calling `recv` again continues.
    ///
    /// Copying a record costs an allocation on this thread, which under load contends with
    /// librdkafka's own threads for the allocator (see `BENCHMARKS.md`): where throughput matters,
    /// use [`DkgConsumer::recv_borrowed`].
    ///
    /// Cancellation safe: dropping the future loses no record.
    pub async fn recv(&mut self) -> Result<DkgMessage> {
        let Self { consumer, inner } = self;
        let record = Inner::next_record(consumer, inner).await?;
        Ok(record.detach_with(&inner.topic, inner.fetched_headers))
    }

    /// Like [`DkgConsumer::recv`] without copying: the record borrows the consumer (as rdkafka's
    /// `StreamConsumer::recv` does), so it must be dropped before the next call, which is also
    /// when it counts as processed. Records that were held come as owned copies.
    ///
    /// Cancellation safe: dropping the future loses no record.
    pub async fn recv_borrowed(&mut self) -> Result<DkgRecord<'_>> {
        let Self { consumer, inner } = self;
        Inner::next_record(consumer, inner).await
    }

    /// Mark the last record processed and commit every owned partition synchronously (offsets
    /// and progress).
    pub async fn commit(&mut self) -> Result<()> {
        self.inner.commit().await
    }

    /// Leave the group cleanly: mark the last record processed, commit, then leave: the
    /// revocation runs [`ConsumerHooks::on_partitions_revoked`] and commits the final offsets
    /// and progress (the group rebalances at once). Errors if that final commit failed (the
    /// records since the previous commit will then be delivered again to the next owners).
    pub async fn close(self) -> Result<()> {
        let Self {
            consumer,
            mut inner,
        } = self;
        if let Err(e) = inner.commit().await {
            // A rebalance in progress, typically: the revocation below commits again.
            debug!(topic = %inner.topic, error = %e, "commit before close failed");
        }
        inner.maintain();
        inner.writer.flush(Duration::from_secs(5));
        inner.closed = true;
        inner.shared.closing.store(true, Ordering::Release);
        // Give the partitions up while the group handle is alive: `unsubscribe` makes librdkafka
        // emit the final revocation now, and the polls below serve it (hooks, final commit,
        // `incremental_unassign`). Closing with a live subscription would emit it from inside
        // librdkafka's close instead, where it can be served after the group handle terminated:
        // the `incremental_unassign` it requires then never gets a reply (seen as a hung close).
        consumer.unsubscribe();
        let deadline = Instant::now() + UNSUBSCRIBE_TIMEOUT;
        loop {
            match consumer.assignment() {
                Ok(tpl) if tpl.count() == 0 => break,
                Ok(_) => {}
                Err(e) => {
                    warn!(topic = %inner.topic, error = %e, "assignment during close");
                    break;
                }
            }
            if Instant::now() >= deadline {
                warn!(topic = %inner.topic, "partitions not revoked within {UNSUBSCRIBE_TIMEOUT:?} of unsubscribe: closing anyway");
                break;
            }
            // Serves the revocation. A record fetched meanwhile is dropped unprocessed: it is past
            // the committed offset, so the partition's next owner reads it.
            let _ = tokio::time::timeout(Duration::from_millis(50), consumer.recv()).await;
        }
        let shared = Arc::clone(&inner.shared);
        drop(inner);
        // librdkafka's close blocks (leave the group, final revocation). On a plain thread, not
        // the runtime's blocking pool: should it never return, the runtime can still shut down.
        let (done, left) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("dkg-consumer-close".into())
            .spawn(move || {
                drop(consumer);
                let _ = done.send(());
            })
            .map_err(|e| Error::Timeout {
                what: format!("starting the close thread: {e}"),
                millis: 0,
            })?;
        if tokio::time::timeout(CLOSE_TIMEOUT, left).await.is_err() {
            return Err(Error::Timeout {
                what: "leaving the consumer group".into(),
                millis: duration_millis(CLOSE_TIMEOUT),
            });
        }
        let failed = shared
            .final_commit
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        match failed {
            None => Ok(()),
            Some(e) => Err(Error::Timeout {
                what: format!("final commit on close: {e}"),
                millis: 0,
            }),
        }
    }

    /// The data topic.
    #[must_use]
    pub fn topic(&self) -> &str {
        &self.inner.topic
    }

    /// The consumer group.
    #[must_use]
    pub fn group(&self) -> &str {
        &self.inner.group
    }

    /// This member's name (the `member` metric label).
    #[must_use]
    pub fn member(&self) -> &str {
        &self.inner.member
    }

    /// The newest assignment known for the topic.
    #[must_use]
    pub fn assignment(&self) -> Option<Arc<Assignment>> {
        self.inner.shared.core().latest().cloned()
    }

    /// The partitions this member owns.
    #[must_use]
    pub fn owned_partitions(&self) -> Vec<u32> {
        self.inner.shared.core().owned()
    }

    /// The lowest epoch drained on every partition, as this member knows it: records of epochs
    /// up to it are never held.
    #[must_use]
    pub fn settled_epoch(&self) -> u64 {
        self.inner.shared.core().settled()
    }

    /// Records held right now (all owned partitions).
    #[must_use]
    pub fn held_records(&self) -> usize {
        self.inner.shared.core().held_counts().map(|(_, n)| n).sum()
    }
}
