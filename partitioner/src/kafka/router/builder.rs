//! [`DkgRouterBuilder`] and the plain [`RouterConfig`] it wraps (the producer's builder wraps the
//! same struct, and both get their setters from one macro, [`router_setters`]).

use super::*;
use crate::kafka::redact::RedactedConfig;

/// Settings of a [`DkgRouter`] (all but the client config and the partition-count source), each
/// with its default. [`DkgRouterBuilder`] and
/// [`DkgProducerBuilder`](crate::DkgProducerBuilder) wrap one; their setters set these
/// fields.
#[derive(Clone)]
#[non_exhaustive]
pub struct RouterConfig {
    /// The control topic to follow. Default [`DEFAULT_CONTROL_TOPIC`].
    pub control_topic: String,
    /// Register the `dkg_producer_*` metrics in this registry (see [`crate::kafka::metrics`]).
    /// Default: not registered. One router per registry (a second registration fails with
    /// [`Error::Metrics`]).
    pub metrics: Option<Registry>,
    /// Topics this process will produce to: their partition counts are fetched before `build`
    /// returns, so an existing assignment routes from the very first record. Topics not declared
    /// are picked up on their first record (routed by librdkafka's partitioner until their
    /// partition count arrives, typically a few milliseconds). Default: none.
    pub topics: Vec<String>,
    /// Limit for `build`: reading the control topic to its end and the declared topics' metadata.
    /// Default [`DEFAULT_STARTUP_TIMEOUT`].
    pub startup_timeout: Duration,
    /// How often the partition counts of the topics in use are re-read (a partition increase
    /// switches to fallback within this interval). Default 5 s; at least 100 ms is used.
    pub metadata_refresh_interval: Duration,
    /// Time limit of one metadata request. Default 5 s.
    pub metadata_timeout: Duration,
    /// Create the control topic if missing and check its configuration at build
    /// ([`control::ensure_control_topic`]; needs the CreateTopics/DescribeConfigs ACLs).
    /// Default true. With false a missing control topic reads as empty and is followed once it
    /// exists.
    pub ensure_control_topic: bool,
    /// Replication factor used when creating the control topic. Default
    /// [`BROKER_DEFAULT_REPLICATION`](topic::BROKER_DEFAULT_REPLICATION).
    pub control_topic_replication: i32,
    /// Full configuration of the control-topic consumer (and admin client), replacing the one
    /// derived from the client config by [`control::connection_config`]. Reader settings
    /// (no commits, `fetch.wait.max.ms=100`, ...) are still applied on top. Default: derived.
    pub control_consumer_config: Option<ClientConfig>,
    /// Reject control-topic values larger than this (capped at
    /// [`MAX_ASSIGNMENT_BYTES`](dkg_kafka_core::MAX_ASSIGNMENT_BYTES), the default).
    pub max_assignment_bytes: usize,
    /// Compute [`Routing::moved`] (one more O(1) lookup per routed record, in the previous
    /// assignment). Default false; [`DkgProducer`](crate::DkgProducer) turns it on for
    /// [`EpochHeader::Moved`](crate::EpochHeader::Moved).
    pub track_moved_keys: bool,
}

// By hand: the control consumer's config may hold secrets (shown through `RedactedConfig`).
impl fmt::Debug for RouterConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RouterConfig")
            .field("control_topic", &self.control_topic)
            .field("metrics", &self.metrics.is_some())
            .field("topics", &self.topics)
            .field("startup_timeout", &self.startup_timeout)
            .field("metadata_refresh_interval", &self.metadata_refresh_interval)
            .field("metadata_timeout", &self.metadata_timeout)
            .field("ensure_control_topic", &self.ensure_control_topic)
            .field("control_topic_replication", &self.control_topic_replication)
            .field(
                "control_consumer_config",
                &self.control_consumer_config.as_ref().map(RedactedConfig),
            )
            .field("max_assignment_bytes", &self.max_assignment_bytes)
            .field("track_moved_keys", &self.track_moved_keys)
            .finish()
    }
}

impl Default for RouterConfig {
    fn default() -> Self {
        Self {
            control_topic: DEFAULT_CONTROL_TOPIC.to_owned(),
            metrics: None,
            topics: Vec::new(),
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            metadata_refresh_interval: Duration::from_secs(5),
            metadata_timeout: Duration::from_secs(5),
            ensure_control_topic: true,
            control_topic_replication: topic::BROKER_DEFAULT_REPLICATION,
            control_consumer_config: None,
            max_assignment_bytes: crate::assignment::MAX_ASSIGNMENT_BYTES,
            track_moved_keys: false,
        }
    }
}

/// The setters of the [`RouterConfig`] fields, written once for both builders that wrap one:
/// `router_setters!(field)` inside an `impl` of a builder whose `field` is a `RouterConfig`.
macro_rules! router_setters {
    ($field:ident) => {
        /// Replace every router setting at once (the setters below set one each).
        #[must_use]
        pub fn router_config(mut self, config: $crate::kafka::router::RouterConfig) -> Self {
            self.$field = config;
            self
        }

        /// [`RouterConfig::control_topic`](crate::kafka::router::RouterConfig::control_topic).
        #[must_use]
        pub fn control_topic(mut self, name: impl Into<String>) -> Self {
            self.$field.control_topic = name.into();
            self
        }

        /// [`RouterConfig::metrics`](crate::kafka::router::RouterConfig::metrics).
        #[must_use]
        pub fn metrics(mut self, registry: &prometheus::Registry) -> Self {
            self.$field.metrics = Some(registry.clone());
            self
        }

        /// Add to [`RouterConfig::topics`](crate::kafka::router::RouterConfig::topics).
        #[must_use]
        pub fn topics<I, S>(mut self, topics: I) -> Self
        where
            I: IntoIterator<Item = S>,
            S: Into<String>,
        {
            self.$field
                .topics
                .extend(topics.into_iter().map(Into::into));
            self
        }

        /// [`RouterConfig::startup_timeout`](crate::kafka::router::RouterConfig::startup_timeout).
        #[must_use]
        pub fn startup_timeout(mut self, timeout: std::time::Duration) -> Self {
            self.$field.startup_timeout = timeout;
            self
        }

        /// [`RouterConfig::metadata_refresh_interval`](crate::kafka::router::RouterConfig::metadata_refresh_interval).
        #[must_use]
        pub fn metadata_refresh_interval(mut self, interval: std::time::Duration) -> Self {
            self.$field.metadata_refresh_interval = interval;
            self
        }

        /// [`RouterConfig::metadata_timeout`](crate::kafka::router::RouterConfig::metadata_timeout).
        #[must_use]
        pub fn metadata_timeout(mut self, timeout: std::time::Duration) -> Self {
            self.$field.metadata_timeout = timeout;
            self
        }

        /// [`RouterConfig::ensure_control_topic`](crate::kafka::router::RouterConfig::ensure_control_topic).
        #[must_use]
        pub fn ensure_control_topic(mut self, ensure: bool) -> Self {
            self.$field.ensure_control_topic = ensure;
            self
        }

        /// [`RouterConfig::control_topic_replication`](crate::kafka::router::RouterConfig::control_topic_replication).
        #[must_use]
        pub fn control_topic_replication(mut self, replication: i32) -> Self {
            self.$field.control_topic_replication = replication;
            self
        }

        /// [`RouterConfig::control_consumer_config`](crate::kafka::router::RouterConfig::control_consumer_config).
        #[must_use]
        pub fn control_consumer_config(mut self, config: rdkafka::ClientConfig) -> Self {
            self.$field.control_consumer_config = Some(config);
            self
        }

        /// [`RouterConfig::max_assignment_bytes`](crate::kafka::router::RouterConfig::max_assignment_bytes).
        #[must_use]
        pub fn max_assignment_bytes(mut self, max: usize) -> Self {
            self.$field.max_assignment_bytes = max;
            self
        }
    };
}
pub(crate) use router_setters;

/// Builder of a [`DkgRouter`]: the client config, a [`RouterConfig`] (defaults documented there)
/// and where partition counts come from.
pub struct DkgRouterBuilder {
    connection: ClientConfig,
    config: RouterConfig,
    metadata_source: Option<Arc<dyn PartitionCountSource>>,
    /// Stamp windows closed by an ordering producer (from the first adoption on, the start-up
    /// one included).
    track_windows: bool,
}

impl fmt::Debug for DkgRouterBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DkgRouterBuilder")
            .field("config", &self.config)
            .field("metadata_source", &self.metadata_source.is_some())
            .finish_non_exhaustive()
    }
}

impl DkgRouterBuilder {
    pub(super) fn new(config: ClientConfig) -> Self {
        Self {
            connection: control::connection_config(&config),
            config: RouterConfig::default(),
            metadata_source: None,
            track_windows: false,
        }
    }

    router_setters!(config);

    /// [`RouterConfig::track_moved_keys`].
    #[must_use]
    pub fn track_moved_keys(mut self, track: bool) -> Self {
        self.config.track_moved_keys = track;
        self
    }

    /// Where partition counts come from. Pass the producer you send with (`Arc<BaseProducer>`,
    /// `Arc<ThreadedProducer>`, a `FutureProducer`): librdkafka rejects an explicit partition it
    /// does not know yet, and a count read through the producer's own client is known to it.
    /// Default: the control-topic consumer (fine for [`DkgRouter::partitioner`], which gets counts
    /// from librdkafka itself). Do not pass a producer whose context holds this router's
    /// partitioner: the two would keep each other alive.
    #[must_use]
    pub fn metadata_source(mut self, source: impl PartitionCountSource) -> Self {
        self.metadata_source = Some(Arc::new(source));
        self
    }

    /// Keys moved by an epoch switch count as moved until its stamp window is closed
    /// ([`DkgRouter::close_windows`]), across later switches; a predecessor that is not known
    /// counts every key as moved. For an ordering producer, whose task closes the windows.
    #[must_use]
    pub(crate) fn track_windows(mut self, on: bool) -> Self {
        self.track_windows = on;
        self
    }

    /// Read the control topic to its end, fetch the declared topics' partition counts, start the
    /// background tasks (a tokio runtime is required) and return the router.
    pub async fn build(self) -> Result<DkgRouter> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|e| Error::InvalidConfig {
            field: "runtime",
            reason: format!("DkgRouter needs a tokio runtime for its background tasks: {e}"),
        })?;
        let c = &self.config;
        let deadline = tokio::time::Instant::now() + c.startup_timeout;
        let remaining = || deadline.saturating_duration_since(tokio::time::Instant::now());
        let consumer_config = c
            .control_consumer_config
            .clone()
            .unwrap_or_else(|| self.connection.clone());
        if c.ensure_control_topic {
            let spec = control::control_topic_spec(&c.control_topic, c.control_topic_replication);
            topic::ensure(&consumer_config, &spec, remaining()).await?;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            control_topic: c.control_topic.clone(),
            topics: ArcSwap::from_pointee(TopicMap::default()),
            metrics: ProducerMetrics::new()?,
            metadata_requests: tx,
            keyless: AtomicU32::new(0),
            track_moves: c.track_moved_keys,
            track_windows: self.track_windows,
            adoptions: watch::Sender::new(0),
        });
        let reader = read_control_topic(&shared, &consumer_config, c, remaining()).await?;
        let source: Arc<dyn PartitionCountSource> = match &self.metadata_source {
            Some(s) => Arc::clone(s),
            None => {
                let consumer: BaseConsumer = consumer_config.create()?;
                Arc::new(consumer)
            }
        };
        declared_topics(&shared, &source, c, remaining()).await?;
        if let Some(registry) = &c.metrics {
            let weak = Arc::downgrade(&shared);
            shared.metrics.register(registry, move || {
                weak.upgrade().map_or_else(Vec::new, |s| s.statuses())
            })?;
        }
        let follow = runtime.spawn(follow_control_topic(Arc::clone(&shared), reader));
        let refresh = runtime.spawn(follow_partition_counts(
            Arc::clone(&shared),
            source,
            rx,
            c.metadata_refresh_interval.max(Duration::from_millis(100)),
            c.metadata_timeout,
        ));
        Ok(DkgRouter {
            shared,
            _tasks: Arc::new(TaskGuard(vec![follow, refresh])),
        })
    }
}

/// Read the control topic to its end into `shared`; returns the reader to follow it from there.
async fn read_control_topic(
    shared: &Shared,
    consumer_config: &ClientConfig,
    c: &RouterConfig,
    timeout: Duration,
) -> Result<ControlTopicReader> {
    let book = control::AssignmentBook::new().with_max_value_bytes(c.max_assignment_bytes);
    let mut reader = ControlTopicReader::with_book(consumer_config, &c.control_topic, book)?;
    let read = reader
        .catch_up(timeout, |record| shared.apply(&record.update, false))
        .await?;
    info!(
        control_topic = %c.control_topic,
        records = read,
        assignments = reader.book().len(),
        "read the control topic to its end"
    );
    for a in reader.book().iter() {
        debug!(
            topic = a.topic(),
            epoch = a.epoch(),
            partitions = a.partitions(),
            "current DKG assignment"
        );
    }
    Ok(reader)
}

/// Declared topics: their partition counts are known before the first record.
async fn declared_topics(
    shared: &Arc<Shared>,
    source: &Arc<dyn PartitionCountSource>,
    c: &RouterConfig,
    timeout: Duration,
) -> Result<()> {
    if c.topics.is_empty() {
        return Ok(());
    }
    let names: Vec<Arc<str>> = c
        .topics
        .iter()
        .map(|t| {
            let state = shared.topic(t);
            // Fetched right below rather than through the request channel.
            shared.use_topic(&state, false);
            Arc::clone(&state.name)
        })
        .collect();
    let fetched = tokio::time::timeout(
        timeout,
        refresh_counts(shared, source, names, c.metadata_timeout),
    )
    .await;
    if fetched.is_err() {
        return Err(Error::Timeout {
            what: format!("partition counts of {:?}", c.topics),
            millis: duration_millis(c.startup_timeout),
        });
    }
    for topic in &c.topics {
        let status = shared.topic(topic).status();
        info!(
            topic = %topic,
            partitions = ?known_partitions(shared, topic),
            epoch = status.epoch,
            in_effect = status.in_effect,
            "DKG routing state at start"
        );
    }
    Ok(())
}
