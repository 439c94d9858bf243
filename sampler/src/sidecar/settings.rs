//! The sidecar's flags ([`Args`]) and their validation into [`Settings`]: every range is checked before
//! anything connects, so a bad flag is a clear error naming it, never a retry loop.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use dkg_kafka_core::dkg::{DkgConfig, SplitKeys};
use dkg_kafka_core::hash::BucketHash;
use rdkafka::config::ClientConfig;

use super::RunError;
use super::cluster::DEFAULT_SKETCHES_TOPIC;
use super::decide::{DEFAULT_FIRST_MAX_WAIT_SECS, DEFAULT_FIRST_NOISE, Policy};
use super::fraction::DEFAULT_READ_CHUNK;
use super::window::Weight;
use crate::cli::{ClusterArgs, RedactedConfig};

/// Learn a topic's key skew and publish DKG assignments (the sidecar).
///
/// Consumes the topic in its own consumer group, keeps a decayed window of key frequencies (SpaceSaving +
/// bucket counters), and every interval builds a migration-aware assignment for the topic's current
/// partition count. It publishes (transactionally, so one publisher per topic) when there is none yet or
/// when the current one's predicted imbalance exceeds --imbalance-threshold and a fresh one improves it
/// by more than --improvement-margin. Several instances with the same --group-id share the topic's
/// partitions, ship their windows to --sketches-topic, and the owner of partition 0 merges and publishes.
/// Serves /metrics (Prometheus), /assignment and /healthz on --metrics-addr.
#[derive(Debug, Clone, clap::Args)]
#[command(
    after_help = "Examples:\n  dkg-sampler run --bootstrap-servers 127.0.0.1:9092 --topic orders\n  \
                  dkg-sampler run --bootstrap-servers 127.0.0.1:9092 --topic orders --dry-run --interval-secs 10\n  \
                  DKG_BOOTSTRAP_SERVERS=kafka:9092 DKG_TOPIC=orders dkg-sampler run --once"
)]
pub struct Args {
    /// The cluster, the data topic to learn and the control topic to publish to.
    #[command(flatten)]
    pub cluster: ClusterArgs,

    /// The compacted topic where several sampler instances exchange their windows (created if missing).
    #[arg(long, env = "DKG_SKETCHES_TOPIC", default_value = DEFAULT_SKETCHES_TOPIC)]
    pub sketches_topic: String,

    /// Seconds between decisions (each interval: snapshot the window, build, maybe publish, decay).
    #[arg(long, env = "DKG_INTERVAL_SECS", default_value_t = 30.0)]
    pub interval_secs: f64,

    /// Address of the HTTP server for /metrics, /assignment and /healthz.
    #[arg(long, env = "DKG_METRICS_ADDR", default_value = "127.0.0.1:9464")]
    pub metrics_addr: SocketAddr,

    /// Compute and serve what would be published (metrics, /assignment), publish nothing. Consumes in its
    /// own group (default `dkg-sampler.<topic>.dry-run`), never touches the transactional id.
    #[arg(long, env = "DKG_DRY_RUN")]
    pub dry_run: bool,

    /// The control-topic format version the publisher writes (`--control-format`).
    #[command(flatten)]
    pub format: crate::cli::ControlFormatArgs,

    /// Learn for one interval, publish (regardless of hysteresis), exit. The interval starts at the first
    /// record (waiting for it at most one interval). An interval short of --min-samples records (a
    /// rebalance, a slow first fetch) is followed by another, up to 5 in all; then it exits non-zero. Consumes in its own group (`dkg-sampler.<topic>.once`). Never fences a
    /// running sidecar: it publishes without taking the sidecar's transactional id (it uses
    /// `<transactional-id>.once`, shared by one-shot runs, so each aborts what a killed predecessor
    /// left open), with an epoch above every one on the control topic; a running sidecar reads that
    /// epoch and keeps publishing above it.
    #[arg(long, env = "DKG_ONCE")]
    pub once: bool,

    /// Fraction of the records to observe, in (0, 1]; kept records are weighted back by 1/ratio, so
    /// frequencies stay unbiased (records are chosen at random, not by key).
    #[arg(long, env = "DKG_SAMPLE_RATIO", default_value_t = 1.0)]
    pub sample_ratio: f64,

    /// Fraction of each partition's log to read, in (0, 1]: chunks of --read-chunk consecutive offsets,
    /// seeking over the rest, each record weighted back by the span it stands for. 0.1 follows a topic up
    /// to 10x faster than reading it all; short bursts inside the skipped ranges are missed, and the
    /// window decays more slowly (by 1 - s (1 - --decay), s the share of offsets read) so that it holds as
    /// many records read as full reading's. 1 reads every record.
    #[arg(long, env = "DKG_READ_FRACTION", default_value_t = 1.0)]
    pub read_fraction: f64,

    /// Consecutive offsets per chunk with --read-fraction < 1 (librdkafka prefetches about one chunk).
    #[arg(long, env = "DKG_READ_CHUNK", default_value_t = DEFAULT_READ_CHUNK,
          value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub read_chunk: u64,

    /// What a record weighs when balancing: `records` (every record counts 1) or `bytes` (its key +
    /// value + header names and values), so that a key with few but large records counts for what it
    /// costs the brokers and the consumers. With `bytes` the predicted and observed imbalances are in
    /// bytes (dkg_sampler_weight_info says which); every instance of a sampler group needs the same
    /// value. Bytes/s per partition are exported either way (without the headers with `records`:
    /// parsing them costs allocations per record).
    #[arg(long, env = "DKG_WEIGHT", value_enum, default_value_t = Weight::Records)]
    pub weight: Weight,

    /// Warn (one WARN line per interval, and a `warning` on /healthz, which stays 200) when more
    /// than this share of the keyed records checked in an interval sit on a partition the placement
    /// in effect does not give their key (dkg_sampler_misplaced_records_ratio): a producer without
    /// the wrapper or plug-in, with another partitioner, or stuck on an old control topic. In
    /// [0, 1]; 1 never warns.
    #[arg(long, env = "DKG_MISPLACED_WARN_RATIO", default_value_t = 0.01)]
    pub misplaced_warn_ratio: f64,

    /// Consumer group of the sampler instances of this topic [default: dkg-sampler.<topic>].
    #[arg(long, env = "DKG_GROUP_ID")]
    pub group_id: Option<String>,

    /// This instance's id in the sketches topic and client ids [default: <hostname>-<pid>-<random>].
    #[arg(long, env = "DKG_MEMBER_ID")]
    pub member_id: Option<String>,

    /// Transactional id of the publisher; one per topic fences duplicate publishers
    /// [default: dkg-sampler.<topic>].
    #[arg(long, env = "DKG_TRANSACTIONAL_ID")]
    pub transactional_id: Option<String>,

    /// Heavy-hitter threshold as a share of the window, in (0, 1] [default: min(0.25 / k, 0.1)].
    #[arg(long, env = "DKG_THETA")]
    pub theta: Option<f64>,

    /// SpaceSaving error bound as a share of the window, in (0, 1]; memory is ceil(1/epsilon) counters
    /// [default: theta / 2].
    #[arg(long, env = "DKG_EPSILON")]
    pub epsilon: Option<f64>,

    /// Buckets per partition (ceil(mu * k) buckets for the non-heavy keys) [default: 64, lowered above
    /// about 1,600 partitions so assignments fit Kafka's default 1 MB message limit: 10 at 10,000].
    #[arg(long, env = "DKG_MU")]
    pub mu: Option<f64>,

    /// Split the few heavy keys that no partition can hold: `off` keeps strict key grouping for every
    /// key; `auto` spreads a heavy key whose share of the window exceeds (1 + 0.02) / k over the fewest
    /// partitions that each stay under the mean load (it gives up per-key order; its records go out
    /// by weighted round robin). Documents with split keys are format version 2: every producer and
    /// consumer of the topic must read it (older readers keep their last good assignment).
    #[arg(long, env = "DKG_SPLIT_KEYS", value_enum, default_value_t = SplitMode::Off)]
    pub split_keys: SplitMode,

    /// Split only the keys listed in this file (same rule as `auto`): one key per line (the line's
    /// bytes without the line end); `b64:` starts a base64-encoded key (binary keys, or keys that
    /// start with `#`, `b64:` or contain a line end); empty lines and lines starting with `#` are
    /// ignored. Not combinable with --split-keys.
    #[arg(
        long,
        env = "DKG_SPLIT_KEYS_ALLOW",
        value_name = "FILE",
        conflicts_with = "split_keys"
    )]
    pub split_keys_allow: Option<PathBuf>,

    /// Seed of the bucket hash (murmur2) [default: the library's].
    #[arg(long, env = "DKG_BUCKET_SEED")]
    pub bucket_seed: Option<u32>,

    /// Factor the window is multiplied by after each interval, in [0, 1): 0.5 = a half-life of one
    /// interval; 0 = the window is the last interval only.
    #[arg(long, env = "DKG_DECAY", default_value_t = 0.5)]
    pub decay: f64,

    /// Republish only when the current assignment's predicted imbalance (max/mean - 1) exceeds this ratio.
    #[arg(long, env = "DKG_IMBALANCE_THRESHOLD", default_value_t = 0.10)]
    pub imbalance_threshold: f64,

    /// ... and a fresh assignment lowers it by more than this ratio (raised automatically to 3 standard
    /// deviations of the sampling noise on small windows).
    #[arg(long, env = "DKG_IMPROVEMENT_MARGIN", default_value_t = 0.05)]
    pub improvement_margin: f64,

    /// Sampled records the window must hold before any decision.
    #[arg(long, env = "DKG_MIN_SAMPLES", default_value_t = 1000)]
    pub min_samples: u64,

    /// The first epoch waits until the imbalance that sampling noise gives an assignment fitted to
    /// the window (95th percentile, z_k * sqrt((k - 1) / n): 2% takes 190,000 sampled records over 12
    /// partitions) is at most this ratio; until then the window does not decay.
    #[arg(long, env = "DKG_FIRST_EPOCH_NOISE", default_value_t = DEFAULT_FIRST_NOISE)]
    pub first_epoch_noise: f64,

    /// ... but publishes the first epoch anyway once the window has learned this many seconds.
    #[arg(long, env = "DKG_FIRST_EPOCH_MAX_WAIT_SECS", default_value_t = DEFAULT_FIRST_MAX_WAIT_SECS)]
    pub first_epoch_max_wait_secs: f64,

    /// Heavy keys exported as dkg_sampler_heavy_key_share_ratio series (0-20).
    #[arg(long, env = "DKG_TOP_N", default_value_t = 10, value_parser = clap::value_parser!(u8).range(0..=20))]
    pub top_n: u8,

    /// Where a new consumer group starts reading the topic.
    #[arg(long, env = "DKG_AUTO_OFFSET_RESET", default_value = "latest", value_parser = ["latest", "earliest"])]
    pub auto_offset_reset: String,

    /// Replication factor for the control and sketches topics when the sampler creates them (-1 = the
    /// broker's default.replication.factor).
    #[arg(long, env = "DKG_REPLICATION_FACTOR", default_value_t = -1, allow_negative_numbers = true)]
    pub replication_factor: i32,

    /// Cap of the exponential backoff while the broker is unreachable or the topic missing.
    #[arg(long, env = "DKG_MAX_BACKOFF_SECS", default_value_t = 30.0)]
    pub max_backoff_secs: f64,

    /// With --once: give up after this many seconds when the broker does not answer or the topic
    /// (or the control topic) is not ready, exiting non-zero with one line naming the broker and the
    /// cause. The sidecar (without --once) keeps retrying instead, not ready on /healthz, saying why.
    #[arg(long, env = "DKG_STARTUP_TIMEOUT_SECS", default_value_t = 30.0)]
    pub startup_timeout_secs: f64,
}

/// `--split-keys`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SplitMode {
    /// Strict key grouping for every key.
    Off,
    /// Split any heavy key over (1 + 0.02) / k of the window.
    Auto,
}

/// The keys of a `--split-keys-allow` file (see [`Args::split_keys_allow`]).
pub fn read_allow_list(path: &Path) -> Result<BTreeSet<Vec<u8>>, RunError> {
    let text = std::fs::read(path).map_err(|e| {
        invalid(
            "split-keys-allow",
            format!("cannot read {}: {e}", path.display()),
        )
    })?;
    parse_allow_list(&text)
        .map_err(|reason| invalid("split-keys-allow", format!("{}: {reason}", path.display())))
}

fn parse_allow_list(text: &[u8]) -> Result<BTreeSet<Vec<u8>>, String> {
    let mut keys = BTreeSet::new();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() || line.starts_with(b"#") {
            continue;
        }
        let key = match line.strip_prefix(b"b64:") {
            Some(encoded) => base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|e| format!("line {}: invalid base64 after b64: ({e})", i + 1))?,
            None => line.to_vec(),
        };
        keys.insert(key);
    }
    if keys.is_empty() {
        return Err("no keys (one key per line; # starts a comment line)".into());
    }
    Ok(keys)
}

/// Validated settings.
#[derive(Clone)]
pub struct Settings {
    pub args: Args,
    pub interval: Duration,
    pub group_id: String,
    pub member_id: String,
    pub transactional_id: String,
    pub dkg: DkgConfig,
    pub policy: Policy,
    pub connection: ClientConfig,
    pub max_backoff: Duration,
    /// `--once`: how long start-up may wait for the broker and the topics (`None`: for ever).
    pub startup_timeout: Option<Duration>,
    /// Leader by construction (--once, --dry-run: standalone, own group).
    pub standalone: bool,
}

// By hand: the connection holds the user's secrets (rdkafka's own Debug hides only some of them).
impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("args", &self.args)
            .field("interval", &self.interval)
            .field("group_id", &self.group_id)
            .field("member_id", &self.member_id)
            .field("transactional_id", &self.transactional_id)
            .field("dkg", &self.dkg)
            .field("policy", &self.policy)
            .field("connection", &RedactedConfig(&self.connection))
            .field("max_backoff", &self.max_backoff)
            .field("startup_timeout", &self.startup_timeout)
            .field("standalone", &self.standalone)
            .finish()
    }
}

pub(super) fn invalid(flag: &'static str, reason: impl Into<String>) -> RunError {
    RunError::InvalidArgument {
        flag,
        reason: reason.into(),
    }
}

fn in_unit(flag: &'static str, v: f64, zero_ok: bool, one_ok: bool) -> Result<(), RunError> {
    let ok =
        v.is_finite() && (v > 0.0 || (zero_ok && v == 0.0)) && (v < 1.0 || (one_ok && v == 1.0));
    if ok {
        Ok(())
    } else {
        Err(invalid(flag, format!("{v} is outside its range")))
    }
}

impl Settings {
    pub fn from_args(args: Args) -> Result<Self, RunError> {
        if args.cluster.topic.is_empty() {
            return Err(invalid("topic", "empty"));
        }
        if !(args.interval_secs.is_finite() && args.interval_secs >= 0.1) {
            return Err(invalid(
                "interval-secs",
                format!("{} (must be >= 0.1)", args.interval_secs),
            ));
        }
        in_unit("sample-ratio", args.sample_ratio, false, true)?;
        if !(args.read_fraction.is_finite()
            && args.read_fraction > 0.0
            && args.read_fraction <= 1.0)
        {
            return Err(invalid(
                "read-fraction",
                format!(
                    "{} is outside (0, 1]: 1 reads every record, 0.1 a tenth of each partition",
                    args.read_fraction
                ),
            ));
        }
        in_unit("decay", args.decay, true, false)?;
        in_unit(
            "misplaced-warn-ratio",
            args.misplaced_warn_ratio,
            true,
            true,
        )?;
        if !(args.imbalance_threshold.is_finite() && args.imbalance_threshold >= 0.0) {
            return Err(invalid("imbalance-threshold", "must be >= 0"));
        }
        if !(args.improvement_margin.is_finite() && args.improvement_margin >= 0.0) {
            return Err(invalid("improvement-margin", "must be >= 0"));
        }
        if !(args.first_epoch_noise.is_finite() && args.first_epoch_noise > 0.0) {
            return Err(invalid("first-epoch-noise", "must be > 0"));
        }
        if !(args.first_epoch_max_wait_secs.is_finite() && args.first_epoch_max_wait_secs >= 0.0) {
            return Err(invalid("first-epoch-max-wait-secs", "must be >= 0"));
        }
        if !(args.startup_timeout_secs.is_finite() && args.startup_timeout_secs > 0.0) {
            return Err(invalid(
                "startup-timeout-secs",
                "must be a positive number of seconds",
            ));
        }
        if !(args.max_backoff_secs.is_finite() && args.max_backoff_secs >= 0.1) {
            return Err(invalid("max-backoff-secs", "must be >= 0.1"));
        }
        if args.once && args.dry_run {
            return Err(invalid("once", "cannot be combined with --dry-run"));
        }
        let mut builder = DkgConfig::builder();
        if let Some(mu) = args.mu {
            builder = builder.mu(mu);
        }
        if let Some(t) = args.theta {
            builder = builder.theta(t);
        }
        if let Some(e) = args.epsilon {
            builder = builder.epsilon(e);
        }
        if let Some(seed) = args.bucket_seed {
            builder = builder.bucket_hash(BucketHash::Murmur2 { seed });
        }
        builder = builder.split(match (&args.split_keys_allow, args.split_keys) {
            (Some(path), _) => SplitKeys::Allow(read_allow_list(path)?),
            (None, SplitMode::Auto) => SplitKeys::Auto,
            (None, SplitMode::Off) => SplitKeys::Off,
        });
        let dkg = builder
            .build()
            .map_err(|e| invalid("theta/epsilon/mu", e.to_string()))?;
        let group_id = args.group_id.clone().unwrap_or_else(|| {
            let base = format!("dkg-sampler.{}", args.cluster.topic);
            if args.dry_run {
                format!("{base}.dry-run")
            } else if args.once {
                format!("{base}.once")
            } else {
                base
            }
        });
        let member_id = args.member_id.clone().unwrap_or_else(default_member_id);
        if member_id.is_empty() || member_id.contains('/') {
            return Err(invalid("member-id", "must be non-empty and without '/'"));
        }
        let transactional_id = args
            .transactional_id
            .clone()
            .unwrap_or_else(|| format!("dkg-sampler.{}", args.cluster.topic));
        // A one-shot run never takes over a live sidecar: a transactional id of its own fences
        // nobody (finding 2 of issue 31); its epoch is above every one on the control topic, and a
        // running sidecar reads it and goes on from it. One id for all one-shot runs, not one per
        // run: the next run's init_transactions aborts a transaction a killed run left open, which
        // would otherwise hold every read_committed reader of the control topic (producers) back
        // until the transaction timed out (fault_sampler_kill).
        let transactional_id = if args.once {
            format!("{transactional_id}.once")
        } else {
            transactional_id
        };
        let connection = args
            .cluster
            .client_config(&format!("dkg-sampler-{member_id}"))
            .map_err(|e| invalid("kafka-config", e.to_string()))?;
        Ok(Self {
            interval: Duration::from_secs_f64(args.interval_secs),
            group_id,
            member_id,
            transactional_id,
            dkg,
            policy: Policy {
                imbalance_threshold: args.imbalance_threshold,
                improvement_margin: args.improvement_margin,
                min_samples: args.min_samples,
                noise_z: Policy::default().noise_z,
                first_noise: args.first_epoch_noise,
                first_max_wait_secs: args.first_epoch_max_wait_secs,
            },
            connection,
            max_backoff: Duration::from_secs_f64(args.max_backoff_secs),
            startup_timeout: args
                .once
                .then(|| Duration::from_secs_f64(args.startup_timeout_secs)),
            standalone: args.once || args.dry_run,
            args,
        })
    }
}

fn default_member_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "sampler".to_owned());
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let nonce = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos()))
        ^ std::process::id().rotate_left(16);
    format!("{host}-{}-{:04x}", std::process::id(), nonce & 0xffff)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn settings(extra: &[&str]) -> Result<Settings, String> {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: Args,
        }
        let base = ["x", "--bootstrap-servers", "b:9092", "--topic", "t"];
        let cli = Cli::try_parse_from(base.iter().chain(extra)).map_err(|e| e.to_string())?;
        Settings::from_args(cli.args).map_err(|e| e.to_string())
    }

    #[test]
    fn the_control_format_is_v1_unless_v2_is_asked_for() {
        use crate::cli::ControlFormat;
        let format = |extra: &[&str]| settings(extra).map(|s| s.args.format.control_format);
        assert_eq!(format(&[]), Ok(ControlFormat::V1));
        assert_eq!(format(&["--control-format", "v2"]), Ok(ControlFormat::V2));
        let e = format(&["--control-format", "v3"]).unwrap_err();
        assert!(
            e.contains("v1") && e.contains("v2"),
            "names the choices: {e}"
        );
    }

    #[test]
    fn split_flags_select_the_split_mode() {
        assert_eq!(settings(&[]).unwrap().dkg.split, SplitKeys::Off);
        assert_eq!(
            settings(&["--split-keys", "auto"]).unwrap().dkg.split,
            SplitKeys::Auto
        );
        let path = std::env::temp_dir().join(format!("dkg-allow-{}.txt", std::process::id()));
        std::fs::write(&path, "hot\nb64:/wA=\n").unwrap();
        let allow = settings(&["--split-keys-allow", path.to_str().unwrap()]).unwrap();
        assert_eq!(
            allow.dkg.split,
            SplitKeys::Allow([b"hot".to_vec(), b"\xff\x00".to_vec()].into())
        );
        let both = settings(&[
            "--split-keys",
            "auto",
            "--split-keys-allow",
            path.to_str().unwrap(),
        ]);
        assert!(both.unwrap_err().contains("cannot be used with"));
        std::fs::remove_file(&path).unwrap();
        assert!(settings(&["--split-keys", "sometimes"]).is_err());
    }

    #[test]
    fn weight_defaults_to_records() {
        assert_eq!(settings(&[]).unwrap().args.weight, Weight::Records);
        let bytes = settings(&["--weight", "bytes"]).unwrap();
        assert_eq!(bytes.args.weight, Weight::Bytes);
        assert!(
            settings(&["--weight", "kilos"])
                .unwrap_err()
                .contains("records, bytes")
        );
    }

    #[test]
    fn allow_lists_take_plain_and_base64_keys_and_reject_bad_lines() {
        let keys =
            parse_allow_list(b"# hot keys\nhot\r\n\nb64:/wA=\nwith space \nb64:IyE=\n").unwrap();
        let expected: BTreeSet<Vec<u8>> = [
            b"hot".to_vec(),
            b"\xff\x00".to_vec(),
            b"with space ".to_vec(),
            b"#!".to_vec(),
        ]
        .into();
        assert_eq!(keys, expected);
        let e = parse_allow_list(b"ok\nb64:%%%\n").unwrap_err();
        assert!(e.starts_with("line 2: invalid base64"), "{e}");
        assert!(parse_allow_list(b"# only a comment\n\n").is_err());
        let missing = read_allow_list(Path::new("/nonexistent/allow.txt")).unwrap_err();
        assert!(
            missing.to_string().contains("--split-keys-allow"),
            "{missing}"
        );
    }
}
