//! [`DkgConsumerBuilder`]: from the user's client config and a [`ConsumerConfig`] to a running
//! [`DkgConsumer`].

use super::*;

/// Settings of a [`DkgConsumer`] (all but the client config, the hooks and the metrics registry),
/// each with its default. [`DkgConsumerBuilder`] wraps one; its setters set these fields.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerConfig {
    /// The data topic (required).
    pub topic: Option<String>,
    /// The consumer group (required unless `group.id` is in the client config, the default).
    pub group: Option<String>,
    /// The control topic to follow. Default [`DEFAULT_CONTROL_TOPIC`].
    pub control_topic: String,
    /// The handoff topic (leases, history, progress); producers and consumers of a topic must use
    /// the same one. Default [`DEFAULT_HANDOFF_TOPIC`].
    pub handoff_topic: String,
    /// This member's name: the `member` label of its metrics (unique per registry). Default
    /// (`None`): `client.id` if set, else `dkg-consumer-<pid>-<n>`.
    pub member: Option<String>,
    /// Held records per partition above which the partition is paused (at least 1). Default
    /// [`DEFAULT_MAX_HELD_RECORDS`].
    pub max_held_records: usize,
    /// A paused partition that released nothing for this long is resumed past the limit (see the
    /// module docs). Default 5 s.
    pub stall_timeout: Duration,
    /// Periodic commit of processed offsets (asynchronous). `None`: only on
    /// [`DkgConsumer::commit`], drained changes, revocation and close. Default 5 s.
    pub commit_interval: Option<Duration>,
    /// Limit for `build` (reading the control and handoff topics to their ends). Default
    /// [`DEFAULT_STARTUP_TIMEOUT`].
    pub startup_timeout: Duration,
    /// Create the handoff topic if missing and check its configuration. Default true.
    pub ensure_handoff_topic: bool,
    /// Replication factor used when creating the handoff topic. Default
    /// [`BROKER_DEFAULT_REPLICATION`](topic::BROKER_DEFAULT_REPLICATION).
    pub handoff_topic_replication: i32,
    /// Commit metadata size limit; set it to the broker's `offset.metadata.max.bytes` if that was
    /// raised. Default 4096.
    pub max_metadata_bytes: usize,
    /// Epochs of assignment history kept (at least 2; a key's homes in older epochs count as
    /// unknown: its records wait for every partition). Default 32.
    pub history_epochs: usize,
    /// A record stamped with an epoch this member does not know (another control topic, a
    /// recreated one, a bogus `dkg-epoch` header) is held at most this long, then delivered and
    /// counted in `dkg_consumer_untrusted_records_total{reason="unknown_epoch"}`. Default 10 s.
    pub unknown_epoch_wait: Duration,
    /// The longest lease this consumer honours: a lease read at time `t` counts as expired at
    /// `t + max_lease` at the latest, whatever its `expires_at_ms` says (a skewed producer clock
    /// or a bad record), counted in `dkg_consumer_clamped_leases_total`. Keep producers'
    /// `lease_duration` below it. Default 4 x [`DEFAULT_LEASE`](handoff::DEFAULT_LEASE) (120 s).
    pub max_lease: Duration,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        Self {
            topic: None,
            group: None,
            control_topic: DEFAULT_CONTROL_TOPIC.to_owned(),
            handoff_topic: DEFAULT_HANDOFF_TOPIC.to_owned(),
            member: None,
            max_held_records: DEFAULT_MAX_HELD_RECORDS,
            stall_timeout: Duration::from_secs(5),
            commit_interval: Some(Duration::from_secs(5)),
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            ensure_handoff_topic: true,
            handoff_topic_replication: topic::BROKER_DEFAULT_REPLICATION,
            max_metadata_bytes: dkg_kafka_protocol::consumer::progress::DEFAULT_MAX_METADATA_BYTES,
            history_epochs: dkg_kafka_protocol::consumer::history::DEFAULT_KEEP,
            unknown_epoch_wait: Duration::from_secs(10),
            max_lease: 4 * handoff::DEFAULT_LEASE,
        }
    }
}

/// One setter per [`ConsumerConfig`] field: `name(v: T) => value` defines `fn name(self, v: T)`
/// that sets `settings.name = value` (the field's docs say what it means and its default).
macro_rules! settings_setters {
    ($($name:ident($v:ident: $ty:ty) => $value:expr;)*) => {
        $(
            #[doc = concat!("Set [`ConsumerConfig::", stringify!($name), "`].")]
            #[must_use]
            pub fn $name(mut self, $v: $ty) -> Self {
                self.settings.$name = $value;
                self
            }
        )*
    };
}

/// Builder of a [`DkgConsumer`]: the user's client config, a [`ConsumerConfig`] (defaults
/// documented there), hooks and a metrics registry.
pub struct DkgConsumerBuilder {
    client: ClientConfig,
    settings: ConsumerConfig,
    hooks: Arc<dyn ConsumerHooks>,
    registry: Option<Registry>,
}

impl fmt::Debug for DkgConsumerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DkgConsumerBuilder")
            .field("settings", &self.settings)
            .field("metrics", &self.registry.is_some())
            .finish_non_exhaustive()
    }
}

impl DkgConsumerBuilder {
    pub(super) fn new(client: ClientConfig) -> Self {
        let settings = ConsumerConfig {
            group: client.get("group.id").map(str::to_owned),
            ..ConsumerConfig::default()
        };
        Self {
            client,
            settings,
            hooks: Arc::new(NoHooks),
            registry: None,
        }
    }

    /// Replace every setting at once (the builder's setters below set one each).
    #[must_use]
    pub fn config(mut self, settings: ConsumerConfig) -> Self {
        self.settings = settings;
        self
    }

    settings_setters! {
        topic(v: impl Into<String>) => Some(v.into());
        group(v: impl Into<String>) => Some(v.into());
        control_topic(v: impl Into<String>) => v.into();
        handoff_topic(v: impl Into<String>) => v.into();
        member(v: impl Into<String>) => Some(v.into());
        max_held_records(v: usize) => v;
        stall_timeout(v: Duration) => v;
        commit_interval(v: Option<Duration>) => v;
        startup_timeout(v: Duration) => v;
        ensure_handoff_topic(v: bool) => v;
        handoff_topic_replication(v: i32) => v;
        max_metadata_bytes(v: usize) => v;
        history_epochs(v: usize) => v;
        unknown_epoch_wait(v: Duration) => v;
        max_lease(v: Duration) => v;
    }

    /// State handoff hooks. Default: none.
    #[must_use]
    pub fn hooks(mut self, hooks: impl ConsumerHooks) -> Self {
        self.hooks = Arc::new(hooks);
        self
    }

    /// Register the `dkg_consumer_*` metrics in `registry` (see the metrics module docs).
    /// Default: not registered.
    #[must_use]
    pub fn metrics(mut self, registry: &Registry) -> Self {
        self.registry = Some(registry.clone());
        self
    }

    /// Create the consumer: ensure the handoff topic, read the control and handoff topics to
    /// their ends, then subscribe to the topic and start following both in the background.
    ///
    /// The user's config is passed to librdkafka with `group.id`,
    /// `partition.assignment.strategy=cooperative-sticky` (another strategy is overridden with a
    /// warning), `enable.auto.commit=false`, `enable.auto.offset.store=false` and, if unset,
    /// `statistics.interval.ms=5000` (for the lag gauge). Under the KIP-848 consumer group
    /// protocol (`group.protocol=consumer`, see [`uses_consumer_group_protocol`]) no assignment
    /// strategy is set: the broker assigns, incrementally, which is what the cooperative protocol
    /// gave (the server-side assignor is the group's, `group.remote.assignor` if the user sets one).
    /// Needs a tokio runtime.
    pub async fn build(self) -> Result<DkgConsumer> {
        let (topic, group) = self.names()?;
        let s = &self.settings;
        let deadline = tokio::time::Instant::now() + s.startup_timeout;
        let remaining = || deadline.saturating_duration_since(tokio::time::Instant::now());
        let connection = control::connection_config(&self.client);
        if s.ensure_handoff_topic {
            let spec = control::control_topic_spec(&s.handoff_topic, s.handoff_topic_replication);
            topic::ensure(&connection, &spec, remaining()).await?;
        }
        let config = self.client_config(&group);
        let member = s.member.clone().unwrap_or_else(|| default_member(&config));
        let metrics = ConsumerMetrics::new(&topic, &member, self.registry.as_ref())?;
        let shared = self.shared(&topic, &group);
        let consumer: Arc<StreamConsumer<DkgContext>> =
            Arc::new(config.create_with_context(DkgContext {
                shared: Arc::clone(&shared),
            })?);
        let count = partition_count(&consumer, &topic, remaining(), s.startup_timeout).await?;
        let now = handoff::mono_now();
        {
            let mut core = shared.core();
            core.set_partitions(count, now);
            core.tick(now, handoff::now_ms());
        }
        // Everything published so far, before joining the group.
        let (control, handoff, history_keys) =
            catch_up(&shared, &connection, s, &topic, remaining).await?;
        {
            let core = shared.core();
            info!(topic = %topic, group = %group, member = %member,
                partitions = core.partitions(), epoch = core.max_epoch(),
                leases = core.leases().count(), "DKG consumer starting");
        }
        consumer.subscribe(&[&topic])?;
        let writer = HandoffWriter::new(&connection, &s.handoff_topic)?;
        let topic: Arc<str> = Arc::from(topic.as_str());
        let (tx, rx) = mpsc::unbounded_channel();
        let tasks = Tasks(vec![
            tokio::spawn(follow_control(control, Arc::clone(&topic), tx.clone())),
            tokio::spawn(follow_handoff(handoff, Arc::clone(&topic), tx)),
        ]);
        let now = Instant::now();
        let lanes = shared.core().lanes();
        Ok(DkgConsumer {
            consumer: Arc::clone(&consumer),
            inner: Inner {
                consumer,
                shared,
                topic,
                group,
                member,
                events: rx,
                writer,
                metrics,
                lanes,
                fetched_headers: false,
                _tasks: tasks,
                commit_interval: s.commit_interval,
                next_housekeeping: now,
                next_auto_commit: s.commit_interval.map(|d| now + d),
                next_gc: now + GC_EVERY,
                progress_retry_at: None,
                since_housekeeping: 0,
                history_keys,
                closed: false,
            },
        })
    }

    /// The data topic and the group, checked.
    fn names(&self) -> Result<(String, String)> {
        let topic = self
            .settings
            .topic
            .clone()
            .ok_or_else(|| Error::InvalidConfig {
                field: "topic",
                reason: "a DkgConsumer needs its data topic".into(),
            })?;
        let group = self
            .settings
            .group
            .clone()
            .ok_or_else(|| Error::InvalidConfig {
                field: "group",
                reason: "set .group(..) or group.id".into(),
            })?;
        if topic.is_empty() || topic.contains('/') {
            return Err(Error::InvalidTopic {
                topic,
                reason: "empty or contains '/'",
            });
        }
        Ok((topic, group))
    }

    /// The user's config plus what the wrapper needs (see [`DkgConsumerBuilder::build`]).
    fn client_config(&self, group: &str) -> ClientConfig {
        let mut config = self.client.clone();
        config
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false");
        // KIP-848: librdkafka refuses a client-side strategy (the broker assigns); the user's own
        // classic-only keys are theirs to drop, and librdkafka names them.
        if !uses_consumer_group_protocol(&config) {
            match config.get("partition.assignment.strategy") {
                Some("cooperative-sticky") | None => {}
                Some(other) => warn!(
                    strategy = other,
                    "DkgConsumer uses partition.assignment.strategy=cooperative-sticky (overriding)"
                ),
            }
            config.set("partition.assignment.strategy", "cooperative-sticky");
        }
        if config.get("statistics.interval.ms").is_none() {
            config.set("statistics.interval.ms", "5000");
        }
        config
    }

    /// The state shared with the rdkafka context, around a fresh core.
    fn shared(&self, topic: &str, group: &str) -> Arc<Shared> {
        let s = &self.settings;
        let core = Core::new(
            topic,
            group,
            0,
            CoreConfig {
                max_held: s.max_held_records.max(1),
                stall_timeout: s.stall_timeout,
                max_metadata_bytes: s.max_metadata_bytes,
                history: s.history_epochs.max(2),
                unknown_epoch_wait: s.unknown_epoch_wait,
                max_lease: s.max_lease,
            },
        );
        Arc::new(Shared {
            topic: Arc::from(topic),
            core: Mutex::new(core),
            hooks: Arc::clone(&self.hooks),
            abandoned: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            final_commit: Mutex::new(None),
            notes: Mutex::new(Vec::new()),
            has_notes: AtomicBool::new(false),
            ends: Mutex::new(HashMap::new()),
            window_warned: Mutex::new(HashMap::new()),
            committed_timeout: Duration::from_secs(5),
        })
    }
}

/// The topic's partition count, from the consumer's own client (the topic must exist).
async fn partition_count(
    consumer: &Arc<StreamConsumer<DkgContext>>,
    topic: &str,
    timeout: Duration,
    startup_timeout: Duration,
) -> Result<u32> {
    let probe = Arc::clone(consumer);
    let name = topic.to_owned();
    let count = tokio::task::spawn_blocking(move || {
        use crate::kafka::router::PartitionCountSource as _;
        probe.partition_count(&name, timeout)
    })
    .await
    .map_err(|e| Error::Timeout {
        what: format!("metadata task failed: {e}"),
        millis: duration_millis(startup_timeout),
    })??;
    count.ok_or_else(|| Error::InvalidConfig {
        field: "topic",
        reason: format!("topic {topic:?} does not exist"),
    })
}

/// Read the control and handoff topics to their ends into the core; returns the readers (to
/// follow them from there) and the epochs with a history record.
async fn catch_up(
    shared: &Shared,
    connection: &ClientConfig,
    settings: &ConsumerConfig,
    topic: &str,
    remaining: impl Fn() -> Duration,
) -> Result<(ControlTopicReader, HandoffReader, BTreeSet<u64>)> {
    let mut control = ControlTopicReader::new(connection, &settings.control_topic)?;
    control
        .catch_up(remaining(), |r| {
            if let ControlUpdate::Adopted(a) = &r.update
                && *a.topic() == *topic
            {
                shared
                    .core()
                    .on_assignment(Arc::clone(a), handoff::mono_now());
            }
        })
        .await?;
    let mut history_keys = BTreeSet::new();
    let mut handoff = HandoffReader::new(connection, &settings.handoff_topic)?;
    let read = handoff
        .catch_up(remaining(), |r| {
            if let Ok(entry) = r.entry
                && *entry.topic() == *topic
            {
                let event = BgEvent::Handoff(entry);
                apply(
                    &mut shared.core(),
                    event,
                    handoff::mono_now(),
                    &mut history_keys,
                );
            }
        })
        .await?;
    debug!(
        topic,
        handoff_records = read,
        "handoff topic read to its end"
    );
    Ok((control, handoff, history_keys))
}

pub(super) fn default_member(config: &ClientConfig) -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    config.get("client.id").map_or_else(
        || {
            format!(
                "dkg-consumer-{}-{}",
                std::process::id(),
                SEQ.fetch_add(1, Ordering::Relaxed)
            )
        },
        str::to_owned,
    )
}

/// Whether a consumer created from `config` joins its group with the KIP-848 consumer group
/// protocol: `group.protocol=consumer` in `config`, else librdkafka's default (`classic` in
/// librdkafka 2.12, documented to become `consumer`). Under it the broker assigns partitions and
/// librdkafka refuses a configured `partition.assignment.strategy`, `session.timeout.ms` or
/// `heartbeat.interval.ms` at creation, so [`DkgConsumer`] and the sampler
/// set none of them then; with `classic` they set their strategy as before.
pub fn uses_consumer_group_protocol(config: &ClientConfig) -> bool {
    let value = match config.get("group.protocol") {
        Some(v) => v.to_owned(),
        // librdkafka's own default, so that a changed default is followed, not fought.
        None => ClientConfig::new()
            .create_native_config()
            .and_then(|c| c.get("group.protocol"))
            .unwrap_or_default(),
    };
    value.trim().eq_ignore_ascii_case("consumer")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builder(extra: &[(&str, &str)]) -> DkgConsumerBuilder {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", "127.0.0.1:1");
        for (k, v) in extra {
            config.set(*k, *v);
        }
        DkgConsumer::builder(config).topic("t").group("g")
    }

    #[test]
    fn classic_protocol_gets_the_cooperative_strategy() {
        for extra in [&[][..], &[("group.protocol", "classic")][..]] {
            let c = builder(extra).client_config("g");
            assert_eq!(
                c.get("partition.assignment.strategy"),
                Some("cooperative-sticky")
            );
        }
        // librdkafka 2.12's default is classic.
        assert!(!uses_consumer_group_protocol(&ClientConfig::new()));
    }

    /// KIP-848: nothing librdkafka refuses under `group.protocol=consumer`; the config creates a
    /// consumer (librdkafka checks the combination at creation, without a broker).
    #[test]
    fn consumer_protocol_sets_no_classic_only_key_and_creates() {
        for value in ["consumer", " Consumer "] {
            let c = builder(&[("group.protocol", value)]).client_config("g");
            assert!(uses_consumer_group_protocol(&c), "{value:?}");
            for key in [
                "partition.assignment.strategy",
                "session.timeout.ms",
                "heartbeat.interval.ms",
            ] {
                assert_eq!(c.get(key), None, "{key}");
            }
        }
        let c = builder(&[("group.protocol", "consumer")]).client_config("g");
        let created: KafkaResult<BaseConsumer> = c.create();
        assert!(created.is_ok(), "{:?}", created.err());
        // The refusal this avoids, with the same librdkafka.
        let mut refused = builder(&[("group.protocol", "consumer")]).client_config("g");
        refused.set("partition.assignment.strategy", "cooperative-sticky");
        assert!(refused.create::<BaseConsumer>().is_err());
    }
}
