//! One consumer group of the benchmark: a member per partition, all tasks of this process, each a
//! capacity-limited "service" ([`Work`]: it owes `1 / C` s per record and sleeps once it owes a
//! quantum, so it processes at most C records/s without burning CPU).
//!
//! The DKG group's members are [`DkgConsumer`]s with their default settings (the ordering protocol
//! on, as users run it); the hash group's are plain rdkafka `StreamConsumer`s, as users of Kafka's
//! default partitioner run them. A record counts as processed once its cost is paid; its end-to-end
//! latency is then `now - CreateTime` (the producer sets the timestamp), in milliseconds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use dkg_partitioner::DkgConsumer;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Message;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::report::Sample;
use crate::consume::Work;

/// What the members of one group share with the driver.
#[derive(Debug)]
pub struct Progress {
    /// Records processed (cost paid), over all members.
    pub processed: AtomicU64,
    /// The same per partition (index = partition; a record of a partition beyond it counts only in
    /// `processed`).
    pub processed_by_partition: Vec<AtomicU64>,
    /// Partitions each member owns (refreshed about every 200 ms).
    pub owned: Vec<AtomicU64>,
    /// End-to-end latencies (ms) of the records processed since the driver last took them, with
    /// their partitions.
    latencies: Mutex<Vec<Sample>>,
    /// Receive errors (transient by the clients' contract).
    pub errors: AtomicU64,
}

impl Progress {
    /// The latencies recorded since the last call, emptied.
    pub fn take_latencies(&self) -> Vec<Sample> {
        std::mem::take(
            &mut *self
                .latencies
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// Whether every member owns exactly one partition.
    pub fn one_partition_each(&self) -> bool {
        self.owned.iter().all(|o| o.load(Ordering::Acquire) == 1)
    }
}

/// A member's consumer.
enum Member {
    Dkg(Box<DkgConsumer>),
    Plain(StreamConsumer),
}

impl Member {
    /// The next record's partition and CreateTime (ms), or the client's error.
    async fn next(&mut self) -> anyhow::Result<(i32, Option<i64>)> {
        match self {
            Member::Dkg(c) => {
                let m = c.recv_borrowed().await?;
                Ok((m.partition(), m.timestamp().to_millis()))
            }
            Member::Plain(c) => {
                let m = c.recv().await?;
                Ok((m.partition(), m.timestamp().to_millis()))
            }
        }
    }

    fn owned(&self) -> usize {
        match self {
            Member::Dkg(c) => c.owned_partitions().len(),
            Member::Plain(c) => c.assignment().map_or(0, |a| a.count()),
        }
    }

    async fn close(self) -> anyhow::Result<()> {
        match self {
            Member::Dkg(c) => c.close().await.context("closing a DkgConsumer"),
            Member::Plain(c) => {
                c.unsubscribe();
                Ok(())
            }
        }
    }
}

/// A running group: its shared progress and its member tasks.
pub struct Group {
    pub progress: Arc<Progress>,
    tasks: Vec<JoinHandle<anyhow::Result<()>>>,
}

/// How a group is built.
pub struct GroupSpec {
    pub connection: ClientConfig,
    /// The topic; also the group's id.
    pub topic: String,
    /// Some(control topic): DkgConsumers following it; None: plain StreamConsumers.
    pub dkg_control_topic: Option<String>,
    pub members: u32,
    pub capacity_rps: f64,
}

impl Group {
    /// A group without members (what is left once [`Group::join`] took the tasks).
    pub fn empty() -> Self {
        Self {
            progress: Arc::new(Progress {
                processed: AtomicU64::new(0),
                processed_by_partition: Vec::new(),
                owned: Vec::new(),
                latencies: Mutex::new(Vec::new()),
                errors: AtomicU64::new(0),
            }),
            tasks: Vec::new(),
        }
    }

    /// Build and start the members (they join the group concurrently).
    pub async fn start(spec: &GroupSpec, stop: &watch::Receiver<bool>) -> anyhow::Result<Self> {
        let progress = Arc::new(Progress {
            processed: AtomicU64::new(0),
            // One member per partition: as many partitions as members.
            processed_by_partition: (0..spec.members).map(|_| AtomicU64::new(0)).collect(),
            owned: (0..spec.members).map(|_| AtomicU64::new(0)).collect(),
            latencies: Mutex::new(Vec::new()),
            errors: AtomicU64::new(0),
        });
        let per_record = Duration::from_secs_f64(1.0 / spec.capacity_rps);
        let mut tasks = Vec::new();
        for i in 0..spec.members {
            let name = format!("{}-{i}", spec.topic);
            let mut config = spec.connection.clone();
            config
                .set("client.id", &name)
                .set("auto.offset.reset", "earliest");
            let member = match &spec.dkg_control_topic {
                Some(control) => Member::Dkg(Box::new(
                    DkgConsumer::builder(config)
                        .topic(&spec.topic)
                        .group(&spec.topic)
                        .control_topic(control)
                        .member(&name)
                        .build()
                        .await
                        .with_context(|| format!("starting DkgConsumer {name}"))?,
                )),
                None => {
                    config.set("group.id", &spec.topic);
                    let c: StreamConsumer = config
                        .create()
                        .with_context(|| format!("creating consumer {name}"))?;
                    c.subscribe(&[&spec.topic])
                        .with_context(|| format!("subscribing {name} to {}", spec.topic))?;
                    Member::Plain(c)
                }
            };
            let progress = Arc::clone(&progress);
            let stop = stop.clone();
            tasks.push(tokio::spawn(run_member(
                member,
                i as usize,
                Work::new(per_record),
                progress,
                stop,
            )));
        }
        Ok(Self { progress, tasks })
    }

    /// Wait for every member task to end (the stop fired) and report the first failure.
    pub async fn join(self) -> anyhow::Result<()> {
        let mut first = Ok(());
        for t in self.tasks {
            let r = t.await.context("a member task panicked").and_then(|r| r);
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Refresh period of a member's entry in [`Progress::owned`].
const OWNED_EVERY: Duration = Duration::from_millis(200);

async fn run_member(
    mut member: Member,
    index: usize,
    mut work: Work,
    progress: Arc<Progress>,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let mut owned_at = tokio::time::Instant::now();
    loop {
        if owned_at <= tokio::time::Instant::now() {
            owned_at = tokio::time::Instant::now() + OWNED_EVERY;
            if let Some(o) = progress.owned.get(index) {
                o.store(member.owned() as u64, Ordering::Release);
            }
        }
        let next = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => break,
            r = member.next() => r,
            // recv is cancellation safe: an idle member still refreshes its entry.
            () = tokio::time::sleep_until(owned_at) => continue,
        };
        match next {
            Ok((partition, created_ms)) => {
                tokio::select! {
                    biased;
                    _ = stop.wait_for(|s| *s) => break,
                    () = work.pay() => {}
                }
                progress.processed.fetch_add(1, Ordering::Relaxed);
                if let Some(c) = usize::try_from(partition)
                    .ok()
                    .and_then(|p| progress.processed_by_partition.get(p))
                {
                    c.fetch_add(1, Ordering::Relaxed);
                }
                if let Some(t) = created_ms {
                    let latency_ms = u32::try_from((now_ms() - t).max(0)).unwrap_or(u32::MAX);
                    progress
                        .latencies
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(Sample {
                            partition,
                            latency_ms,
                        });
                }
            }
            Err(e) => {
                progress.errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "receiving");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    member.close().await
}
