//! Start-up of the sidecar: the broker and the data topic, the control and sketches topics, the control
//! view, the consumer thread and the cluster plumbing, each retried with capped exponential backoff while
//! the broker is unreachable or the topic missing (never a crash); then the interval loop
//! ([`super::interval`]) and an orderly shutdown.

use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use dkg_partitioner::kafka::control;
use dkg_partitioner::kafka::topic;
use dkg_partitioner::kafka::topic::TopicSpec;
use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use tokio::sync::watch;

use super::RunError;
use super::cluster::{self, Peers, Shipper};
use super::fraction::Schedule;
use super::http::HttpState;
use super::ingest::{self, Command, ConsumeLoop, ConsumerHandle, Shared};
use super::interval::{Clients, Driver};
use super::metadata::{TopicProblem, topic_partitions};
use super::misplaced::PlacementFeed;
use super::publish::{ControlView, Publisher};
use super::settings::{Settings, invalid};
use super::window::{RecordSampler, Window};

type Admin = Arc<AdminClient<DefaultClientContext>>;

/// Start up, run the intervals until `stop` (or `--once` is done), shut down.
pub(super) async fn run_sampler(
    s: &Settings,
    http: &Arc<HttpState>,
    stop: &mut watch::Receiver<bool>,
) -> Result<(), RunError> {
    let topic = s.args.cluster.topic.clone();
    let admin: AdminClient<DefaultClientContext> = control::connection_config(&s.connection)
        .create()
        .map_err(|e| RunError::Kafka {
            what: "creating the admin client".into(),
            source: e,
        })?;
    let admin = Arc::new(admin);

    // 1. The broker and the topic; 2. the control topic (and the sketches topic for sampler groups).
    let mut retry = Retry {
        s,
        stop,
        http,
        deadline: s.startup_timeout.map(|t| std::time::Instant::now() + t),
        gave_up: None,
    };
    let Some(partitions) = retry.wait_for_topic(&admin).await else {
        return retry.stopped();
    };
    tracing::info!(topic = %topic, partitions, "topic found");
    if !retry.prepare_topics(&admin).await? {
        return retry.stopped();
    }

    // 3. The control topic view.
    let connection = control::connection_config(&s.connection);
    let Some(control_view) = retry.open_control_view(&connection).await else {
        return retry.stopped();
    };
    let initial = control_view.state();
    tracing::info!(
        topic = %topic,
        epoch = initial.current.as_ref().map_or(0, |a| a.epoch()),
        max_epoch = initial.max_epoch,
        "read the control topic"
    );

    // 4. The consumer thread; 5. cluster plumbing.
    let shared = Arc::new(Shared::default());
    let feed = control_view.placement_feed();
    let (consumer, consumer_thread) = start_consumer(s, partitions, &shared, feed)?;
    let peers = Arc::new(Peers::counting(
        http.metrics
            .sketches_rejected
            .with_label_values(&[s.args.cluster.topic.as_str()]),
    ));
    let shipper = start_cluster(s, &connection, &peers, stop)?;
    let publisher = if s.args.dry_run {
        Publisher::dry_run(&connection, &s.args.cluster.control_topic)
    } else {
        Publisher::new(
            &connection,
            &s.args.cluster.control_topic,
            &s.transactional_id,
            s.args.format.control_format,
        )
    };

    let clients = Clients {
        admin,
        consumer: consumer.clone(),
        shared,
        control: control_view,
        peers,
        shipper,
        publisher,
    };
    let dry_current = if s.args.dry_run {
        initial.current.clone()
    } else {
        None
    };
    let mut driver = Driver::new(s, Arc::clone(http), clients, partitions, dry_current);
    let result = driver.run(stop).await;
    shut_down(s, consumer, consumer_thread, driver.shipper()).await;
    result
}

/// The start-up steps that wait for the broker: each retried with capped exponential backoff
/// ([`with_backoff`]) until it succeeds or `stop` fires, reporting what it waits for on `/healthz`.
struct Retry<'a, 'b> {
    s: &'a Settings,
    stop: &'b mut watch::Receiver<bool>,
    http: &'a HttpState,
    /// `--once`: give up at this instant (`--startup-timeout-secs`).
    deadline: Option<std::time::Instant>,
    /// Why it gave up at the deadline: the last failure.
    gave_up: Option<String>,
}

impl Retry<'_, '_> {
    async fn with_backoff<T, F, Fut>(&mut self, what: &str, mut f: F) -> Option<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, String>>,
    {
        let Some(deadline) = self.deadline else {
            return with_backoff(what, self.s.max_backoff, self.stop, self.http, f).await;
        };
        // A person waits (--once): retry until the deadline, then one line naming the cause.
        let mut backoff = Backoff::new(self.s.max_backoff.min(Duration::from_secs(2)));
        loop {
            if *self.stop.borrow() {
                return None;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let attempt = tokio::time::timeout(left.max(Duration::from_millis(1)), f()).await;
            let e = match attempt {
                Ok(Ok(v)) => return Some(v),
                Ok(Err(e)) => e,
                Err(_) => format!(
                    "no answer from the Kafka broker at {}",
                    self.s.args.cluster.bootstrap_servers
                ),
            };
            if std::time::Instant::now() + backoff.next >= deadline {
                let secs = self.s.startup_timeout.map_or(0.0, |t| t.as_secs_f64());
                self.gave_up = Some(format!(
                    "{what}: gave up after {secs:.0} s (--startup-timeout-secs): {e}"
                ));
                return None;
            }
            tracing::warn!(
                "{what}: {e}; retrying in {:.1} s",
                backoff.next.as_secs_f64()
            );
            if !backoff.wait(self.stop).await {
                return None;
            }
        }
    }

    /// A start-up step ended without its result: stopped (fine), or `--once` gave up (an error).
    fn stopped(&mut self) -> Result<(), RunError> {
        match self.gave_up.take() {
            Some(why) => Err(RunError::Once(why)),
            None => Ok(()),
        }
    }

    /// Wait until the broker answers and the data topic exists; its partition count.
    async fn wait_for_topic(&mut self, admin: &Admin) -> Option<u32> {
        let topic = &self.s.args.cluster.topic;
        let bootstrap = &self.s.args.cluster.bootstrap_servers;
        self.with_backoff("waiting for the topic", || async move {
            topic_partitions(admin, topic).await.map_err(|p| match p {
                TopicProblem::Unreachable(e) => {
                    format!("cannot reach the Kafka broker at {bootstrap}: {e}")
                }
                TopicProblem::Missing => format!("topic {topic:?} does not exist on {bootstrap}"),
                TopicProblem::Other(e) => format!("metadata for topic {topic:?}: {e}"),
            })
        })
        .await
    }

    /// Make sure the control topic (unless `--dry-run`) and the sketches topic (sampler groups)
    /// exist and are compacted single-partition topics. `Ok(false)`: stopped meanwhile.
    async fn prepare_topics(&mut self, admin: &Admin) -> Result<bool, RunError> {
        let s = self.s;
        let replication = s.args.replication_factor;
        let mut specs = Vec::new();
        if !s.args.dry_run {
            let spec = control::control_topic_spec(&s.args.cluster.control_topic, replication);
            specs.push(("preparing the control topic", spec));
        }
        if !s.standalone {
            let spec = cluster::sketches_topic_spec(&s.args.sketches_topic, replication);
            specs.push(("preparing the sketches topic", spec));
        }
        for (what, spec) in &specs {
            if !self.ensure_compacted(admin, what, spec).await? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// [`topic::ensure_compacted`], retried while the broker is unreachable; an existing but
    /// misconfigured topic is final (retrying cannot fix it): an error naming what to fix.
    async fn ensure_compacted(
        &mut self,
        admin: &Admin,
        what: &str,
        spec: &TopicSpec,
    ) -> Result<bool, RunError> {
        let misconfigured = Mutex::new(None);
        let ok = self
            .with_backoff(what, || {
                let misconfigured = &misconfigured;
                async move {
                    match topic::ensure_compacted(admin.as_ref(), spec, topic::ADMIN_TIMEOUT).await
                    {
                        Ok(_) => Ok(()),
                        Err(e @ dkg_partitioner::Error::ControlTopicMisconfigured { .. }) => {
                            *misconfigured.lock().unwrap_or_else(PoisonError::into_inner) =
                                Some(e.to_string());
                            Ok(())
                        }
                        Err(e) => Err(e.to_string()),
                    }
                }
            })
            .await;
        if let Some(e) = misconfigured
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
        {
            return Err(RunError::Setup(e));
        }
        Ok(ok.is_some())
    }

    /// Start following the control topic; `None` if stopped meanwhile.
    async fn open_control_view(&mut self, connection: &ClientConfig) -> Option<ControlView> {
        let view_stop = self.stop.clone();
        let control_topic = &self.s.args.cluster.control_topic;
        let topic = &self.s.args.cluster.topic;
        self.with_backoff("reading the control topic", || {
            let stop = view_stop.clone();
            async move {
                ControlView::start(connection, control_topic, topic, stop)
                    .await
                    .map_err(|e| e.to_string())
            }
        })
        .await
    }
}

/// The consumer thread feeding the window: its command handle and the thread.
fn start_consumer(
    s: &Settings,
    partitions: u32,
    shared: &Arc<Shared>,
    placements: Arc<PlacementFeed>,
) -> Result<(ConsumerHandle, JoinHandle<()>), RunError> {
    let topic = &s.args.cluster.topic;
    let window = Window::new(
        &s.dkg,
        partitions,
        RecordSampler::new(s.args.sample_ratio, rand_seed()),
    )
    .map_err(|e| invalid("theta/epsilon/mu", e.to_string()))?
    .weighing(s.args.weight);
    let reads_all = s.args.read_fraction >= 1.0;
    // --read-fraction skips up to the log end of the last statistics: keep it fresh.
    let stats_ms = if reads_all {
        s.interval.as_millis().clamp(1000, 10_000) as u64
    } else {
        1000
    };
    let mut consumer_config = ingest::consumer_config(
        &s.connection,
        &s.group_id,
        &s.args.auto_offset_reset,
        stats_ms,
    );
    if !reads_all {
        ingest::bound_prefetch(&mut consumer_config, &s.connection, s.args.read_chunk);
        // The loop stores the seek targets itself (below), so a restart resumes past a skipped range.
        consumer_config.set("enable.auto.offset.store", "false");
    }
    if s.standalone {
        // --once / --dry-run look at the live stream: never resume from (or store) old offsets.
        consumer_config
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false");
    }
    let (mut consume_loop, consumer) =
        ConsumeLoop::new(&consumer_config, topic, window, Arc::clone(shared)).map_err(|e| {
            RunError::Kafka {
                what: format!("creating the consumer of {topic:?}"),
                source: e,
            }
        })?;
    consume_loop.read_fraction(
        Schedule::new(s.args.read_fraction, s.args.read_chunk).extend_runs(),
        !s.standalone,
    );
    consume_loop.detect_misplacement(placements, partitions);
    let thread = std::thread::Builder::new()
        .name("dkg-consume".into())
        .spawn(move || consume_loop.run(None))
        .map_err(|e| RunError::Setup(format!("cannot start the consumer thread: {e}")))?;
    Ok((consumer, thread))
}

/// Sampler groups: follow the peers' windows in the background; this member's shipper.
fn start_cluster(
    s: &Settings,
    connection: &ClientConfig,
    peers: &Arc<Peers>,
    stop: &watch::Receiver<bool>,
) -> Result<Option<Shipper>, RunError> {
    if s.standalone {
        return Ok(None);
    }
    let lookback = s.interval.mul_f64(cluster::FRESH_INTERVALS + 1.0);
    let follow = cluster::follow_sketches(
        connection.clone(),
        s.args.sketches_topic.clone(),
        s.args.cluster.topic.clone(),
        lookback,
        Arc::clone(peers),
        stop.clone(),
    );
    tokio::spawn(async move {
        if let Err(e) = follow.await {
            tracing::error!("sketch reader stopped: {e}");
        }
    });
    Shipper::new(connection, &s.args.sketches_topic).map(Some)
}

/// Shutdown: the consumer commits and leaves the group; the sketch is retracted; producers flush on drop.
async fn shut_down(
    s: &Settings,
    consumer: ConsumerHandle,
    consumer_thread: JoinHandle<()>,
    shipper: Option<&Shipper>,
) {
    consumer.send(Command::Shutdown);
    let joined = tokio::task::spawn_blocking(move || consumer_thread.join()).await;
    if !matches!(joined, Ok(Ok(()))) {
        tracing::error!("the consumer thread ended abnormally");
    }
    if let Some(shipper) = shipper
        && let Err(e) = shipper
            .retract(&s.args.cluster.topic, &s.member_id, Duration::from_secs(5))
            .await
    {
        tracing::warn!("could not retract this member's sketch: {e}");
    }
}

fn rand_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    t ^ u64::from(std::process::id()).rotate_left(32)
}

/// Exponential backoff, capped.
#[derive(Debug)]
struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    fn new(max: Duration) -> Self {
        Self {
            next: Duration::from_secs(1).min(max),
            max,
        }
    }

    /// Sleep the next delay; `false` if `stop` fired meanwhile.
    async fn wait(&mut self, stop: &mut watch::Receiver<bool>) -> bool {
        let delay = self.next;
        self.next = (self.next * 2).min(self.max);
        tokio::select! {
            _ = tokio::time::sleep(delay) => true,
            _ = stop.wait_for(|s| *s) => false,
        }
    }
}

/// Retry `f` with capped exponential backoff until it succeeds (`Some`) or `stop` fires (`None`).
async fn with_backoff<T, F, Fut>(
    what: &str,
    max: Duration,
    stop: &mut watch::Receiver<bool>,
    state: &HttpState,
    mut f: F,
) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let mut backoff = Backoff::new(max);
    loop {
        if *stop.borrow() {
            return None;
        }
        match f().await {
            Ok(v) => return Some(v),
            Err(e) => {
                tracing::warn!(
                    "{what}: {e}; retrying in {:.1} s",
                    backoff.next.as_secs_f64()
                );
                state.update_health(|h| {
                    h.state = "waiting";
                    h.message = Some(format!("{what}: {e}"));
                });
                if !backoff.wait(stop).await {
                    return None;
                }
            }
        }
    }
}
