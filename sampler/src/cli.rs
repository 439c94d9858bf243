//! Command-line flags shared by several subcommands (flattened into their `Args` with
//! `#[command(flatten)]`), so a flag has one name, one `DKG_*` variable and one meaning everywhere.
//!
//! # Kafka client settings
//! Every subcommand that talks to Kafka takes [`KafkaConfigArgs`]: a properties file
//! (`--kafka-config-file`, `DKG_KAFKA_CONFIG_FILE`) and repeatable `--kafka-config KEY=VALUE` entries
//! (`DKG_KAFKA_CONFIG`: one entry per line), applied in that order on top of the subcommand's own
//! settings, so a later entry wins. A value is everything after the first `=`, commas included
//! (`sasl.jaas.config`-style values, broker lists). The variable is split on newlines, not commas,
//! because commas occur in values and newlines never do.
//!
//! A setting's value is shown only if its key is on the allowlist of known non-secret settings
//! ([`is_secret_key`] is false); every other value, unknown and misspelt keys included, is
//! `<redacted>` wherever the sampler shows configuration: its start-up log
//! ([`KafkaConfigArgs::describe`]), `Debug` output and the errors about malformed entries. Texts the
//! sampler does not compose (librdkafka's errors and logs, which echo a rejected property's value)
//! are scrubbed of those values on their way out ([`ScrubbedStderr`], [`scrubbed`]). `--help` never
//! shows a variable's value.

use std::fmt;
use std::path::{Path, PathBuf};

use dkg_partitioner::kafka::control::DEFAULT_CONTROL_TOPIC;
use rdkafka::config::ClientConfig;

/// The cluster, the data topic and the control topic: the flags `run` and `inspect` share.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// Kafka bootstrap servers (host:port[,host:port...]).
    #[arg(long, env = "DKG_BOOTSTRAP_SERVERS")]
    pub bootstrap_servers: String,

    /// The data topic (the one producers write to and assignments are made for).
    #[arg(long, env = "DKG_TOPIC")]
    pub topic: String,

    /// The compacted control topic assignments are published to (`run` creates it if missing; `inspect`
    /// only reads it).
    #[arg(long, env = "DKG_CONTROL_TOPIC", default_value = DEFAULT_CONTROL_TOPIC)]
    pub control_topic: String,

    /// Extra librdkafka settings for every client.
    #[command(flatten)]
    pub kafka: KafkaConfigArgs,
}

impl ClusterArgs {
    /// The base client configuration: the bootstrap servers, `client.id`, then the
    /// [`KafkaConfigArgs`] settings (last, so a user's setting wins, `client.id` included).
    pub fn client_config(&self, client_id: &str) -> Result<ClientConfig, BadKafkaConfig> {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap_servers);
        config.set("client.id", client_id);
        self.kafka.apply(&mut config)?;
        Ok(config)
    }
}

/// Which format version the publisher's control-topic records use: the flag `run` and `retract`
/// share (`docs/spec.md` 11.1 step 3: upgrade consumers, then producers, then switch this on).
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct ControlFormatArgs {
    /// Control-topic format the publisher writes. `v1` (default): documents of version 1 (version 2
    /// only for a split key) and tombstones, which every reader understands. `v2`, once every
    /// producer and consumer reads version 2: a `@generation` record naming the control topic's
    /// incarnation, version 2 documents naming it (compact tables above 256 KiB), and retraction
    /// documents that keep their epoch, so epochs never repeat after a retraction, compaction or a
    /// recreated control topic (`docs/spec.md` 6.4).
    #[arg(long, env = "DKG_CONTROL_FORMAT", value_enum, default_value_t = ControlFormat::V1)]
    pub control_format: ControlFormat,
}

/// The values of [`ControlFormatArgs::control_format`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ControlFormat {
    /// Version 1 records only (readers of every version agree).
    #[default]
    V1,
    /// The publisher's version 2 features (generation, retraction documents, compact tables).
    V2,
}

/// Extra librdkafka settings (security, timeouts) for every client of a subcommand.
#[derive(Clone, Default, clap::Args)]
pub struct KafkaConfigArgs {
    /// Extra librdkafka setting for every client, e.g. `security.protocol=SASL_SSL`; repeat the flag
    /// for several. The value is everything after the first `=` (commas included). The variable
    /// holds one KEY=VALUE per line. Applied after --kafka-config-file, so these win.
    #[arg(
        long = "kafka-config",
        env = "DKG_KAFKA_CONFIG",
        value_delimiter = '\n',
        value_name = "KEY=VALUE",
        hide_env_values = true
    )]
    pub kafka_config: Vec<String>,

    /// A file of librdkafka settings, Java properties style: `key=value` lines, `#` or `!` comment
    /// lines, blank lines ignored; no escapes or continuation lines (a value runs to the end of its
    /// line). Keep secrets (sasl.password, ...) here rather than on the command line.
    #[arg(
        long = "kafka-config-file",
        env = "DKG_KAFKA_CONFIG_FILE",
        value_name = "PATH",
        hide_env_values = true
    )]
    pub kafka_config_file: Option<PathBuf>,
}

/// A malformed Kafka setting. Never holds a secret value: an entry whose key looks secret is named by
/// its position only.
#[derive(Debug, thiserror::Error)]
pub enum BadKafkaConfig {
    /// A `--kafka-config` entry (1-based position) is not KEY=VALUE.
    #[error("--kafka-config entry {position} ({shown}) is not KEY=VALUE")]
    Entry {
        /// 1-based position among the entries (the variable's lines, or the flags).
        position: usize,
        /// The entry, or `<redacted>` if it looks secret.
        shown: String,
    },
    /// A line of `--kafka-config-file` is not `key=value`.
    #[error("--kafka-config-file {}: line {line}: {reason}", path.display())]
    FileLine {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: &'static str,
    },
    /// `--kafka-config-file` cannot be read.
    #[error("cannot read --kafka-config-file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

pub use dkg_partitioner::kafka::redact::{REDACTED, RedactedConfig, is_secret_key, shown_value};

/// The values of every setting not on the allowlist ([`is_secret_key`]) this process was given:
/// the log writer and the final error line scrub them from texts the sampler does not compose
/// (librdkafka's errors and log lines echo a rejected property's key and value).
static SECRETS: std::sync::RwLock<Vec<String>> = std::sync::RwLock::new(Vec::new());

/// Add `settings`' secret values to [`SECRETS`].
fn remember_secrets(settings: &[(String, String)]) {
    let fresh = dkg_partitioner::kafka::redact::secret_values(
        settings.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    );
    if fresh.is_empty() {
        return;
    }
    let mut all = SECRETS
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    all.extend(fresh);
    all.sort_by_key(|v| std::cmp::Reverse(v.len()));
    all.dedup();
}

/// `text` without any secret value this process was given.
pub fn scrubbed(text: &str) -> String {
    let secrets = SECRETS
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if secrets.is_empty() {
        text.to_owned()
    } else {
        dkg_partitioner::kafka::redact::scrub(text, &secrets)
    }
}

/// stderr, every line scrubbed of secret values ([`scrubbed`]): the writer of the log.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScrubbedStderr;

impl std::io::Write for ScrubbedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // The fmt layer writes one formatted event per call.
        let text = scrubbed(&String::from_utf8_lossy(buf));
        std::io::stderr().write_all(text.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Install the log (stderr, scrubbed: [`ScrubbedStderr`]) with `level` in tracing's EnvFilter syntax,
/// else RUST_LOG, else `info`: the `--log-level` of both binaries (`dkg-sampler`, `dkg-lab`).
pub fn init_tracing(level: Option<&str>) -> anyhow::Result<()> {
    use tracing_subscriber::EnvFilter;
    let filter = match level {
        Some(level) => EnvFilter::try_new(level)
            .map_err(|e| anyhow::anyhow!("invalid --log-level {level:?}: {e}"))?,
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| ScrubbedStderr)
        .init();
    Ok(())
}

/// A binary's exit: success, or the error (its causes too) on stderr, scrubbed of secrets, and failure.
pub fn exit_code(result: anyhow::Result<()>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", scrubbed(&format!("{err:#}")));
            std::process::ExitCode::FAILURE
        }
    }
}

/// `key=value` with [`shown_value`].
fn shown_entry(entry: &str) -> String {
    match entry.split_once('=') {
        Some((k, v)) => format!("{}={}", k.trim(), shown_value(k.trim(), v.trim())),
        // No '=': the whole text may be a mistyped secret.
        None if is_secret_key(entry) => REDACTED.to_owned(),
        None => entry.to_owned(),
    }
}

impl KafkaConfigArgs {
    /// The settings in the order they apply: the file's lines, then the `--kafka-config` entries
    /// (blank ones skipped). Keys and values are trimmed.
    pub fn settings(&self) -> Result<Vec<(String, String)>, BadKafkaConfig> {
        let mut out = match &self.kafka_config_file {
            Some(path) => read_properties(path)?,
            None => Vec::new(),
        };
        for (i, entry) in self.kafka_config.iter().enumerate() {
            if entry.trim().is_empty() {
                continue;
            }
            match entry.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => {
                    out.push((k.trim().to_owned(), v.trim().to_owned()));
                }
                _ => {
                    return Err(BadKafkaConfig::Entry {
                        position: i + 1,
                        shown: shown_entry(entry),
                    });
                }
            }
        }
        remember_secrets(&out);
        Ok(out)
    }

    /// Set every setting on `config` (later ones win).
    pub fn apply(&self, config: &mut ClientConfig) -> Result<(), BadKafkaConfig> {
        for (k, v) in self.settings()? {
            config.set(k, v);
        }
        Ok(())
    }

    /// The settings for a log line, secrets redacted: `key=value key=<redacted> ...` (or `none`).
    pub fn describe(&self) -> Result<String, BadKafkaConfig> {
        let settings = self.settings()?;
        if settings.is_empty() {
            return Ok("none".to_owned());
        }
        Ok(settings
            .iter()
            .map(|(k, v)| format!("{k}={}", shown_value(k, v)))
            .collect::<Vec<_>>()
            .join(" "))
    }

    /// These settings as the environment of a child `dkg-sampler` or `dkg-lab` (the variables, not flags: a
    /// secret in an argument would show in the process list).
    pub fn child_env(&self) -> Vec<(&'static str, String)> {
        let mut env = vec![("DKG_KAFKA_CONFIG", self.kafka_config.join("\n"))];
        if let Some(path) = &self.kafka_config_file {
            env.push(("DKG_KAFKA_CONFIG_FILE", path.display().to_string()));
        }
        env
    }
}

impl fmt::Debug for KafkaConfigArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries: Vec<String> = self.kafka_config.iter().map(|e| shown_entry(e)).collect();
        f.debug_struct("KafkaConfigArgs")
            .field("kafka_config", &entries)
            .field("kafka_config_file", &self.kafka_config_file)
            .finish()
    }
}

/// Java-properties-style `key=value` lines (see [`KafkaConfigArgs::kafka_config_file`]).
fn read_properties(path: &Path) -> Result<Vec<(String, String)>, BadKafkaConfig> {
    let text = std::fs::read_to_string(path).map_err(|source| BadKafkaConfig::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_properties(&text).map_err(|(line, reason)| BadKafkaConfig::FileLine {
        path: path.to_owned(),
        line,
        reason,
    })
}

fn parse_properties(text: &str) -> Result<Vec<(String, String)>, (usize, &'static str)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with('!') {
            continue;
        }
        match t.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                out.push((k.trim().to_owned(), v.trim().to_owned()));
            }
            Some(_) => return Err((i + 1, "empty key (expected key=value)")),
            None => return Err((i + 1, "no '=' (expected key=value)")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    const JAAS: &str = "org.apache.kafka.common.security.scram.ScramLoginModule required \
                        username=\"u\" password=\"p,w=1\";";

    fn kafka(entries: &[&str], file: Option<PathBuf>) -> KafkaConfigArgs {
        KafkaConfigArgs {
            kafka_config: entries.iter().map(|s| (*s).to_owned()).collect(),
            kafka_config_file: file,
        }
    }

    fn args(entries: &[&str]) -> ClusterArgs {
        ClusterArgs {
            bootstrap_servers: "b:9092".into(),
            topic: "t".into(),
            control_topic: DEFAULT_CONTROL_TOPIC.into(),
            kafka: kafka(entries, None),
        }
    }

    fn temp_file(name: &str, text: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!("dkg-cli-{}-{name}", std::process::id()));
        std::fs::write(&path, text).expect("write the temp file");
        path
    }

    #[test]
    fn kafka_config_entries_override_the_defaults() {
        let c = args(&[" security.protocol = SASL_SSL", "client.id=mine"])
            .client_config("dkg-sampler-x")
            .expect("valid entries");
        assert_eq!(c.get("bootstrap.servers"), Some("b:9092"));
        assert_eq!(c.get("security.protocol"), Some("SASL_SSL"));
        assert_eq!(c.get("client.id"), Some("mine"));
        let c = args(&[])
            .client_config("dkg-sampler-x")
            .expect("no entries");
        assert_eq!(c.get("client.id"), Some("dkg-sampler-x"));
    }

    #[test]
    fn values_keep_their_commas_and_equals_signs() {
        let jaas = format!("sasl.jaas.config={JAAS}");
        let c = args(&[&jaas, "bootstrap.servers=a:1,b:2"])
            .client_config("x")
            .expect("valid");
        assert_eq!(c.get("sasl.jaas.config"), Some(JAAS));
        assert_eq!(c.get("bootstrap.servers"), Some("a:1,b:2"));
    }

    #[test]
    fn the_variable_is_one_entry_per_line_and_the_flag_repeats() {
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            kafka: KafkaConfigArgs,
        }
        let cli = Cli::parse_from([
            "x",
            "--kafka-config",
            "a=1,2",
            "--kafka-config",
            "sasl.password=p,q",
        ]);
        assert_eq!(cli.kafka.kafka_config, ["a=1,2", "sasl.password=p,q"]);
        // The variable's split is clap's value_delimiter, the same code path as for the flag.
        let cli = Cli::parse_from(["x", "--kafka-config", "a=1,2\nb=3\n"]);
        assert_eq!(
            cli.kafka.settings().expect("valid"),
            [("a".into(), "1,2".into()), ("b".into(), "3".into())]
        );
    }

    #[test]
    fn the_file_applies_first_and_later_entries_win() {
        let path = temp_file(
            "order.properties",
            "# comment\n! also a comment\n\nsecurity.protocol = SASL_PLAINTEXT\nlinger.ms=5\n\
             bootstrap.servers=a:1,b:2\n",
        );
        let k = kafka(&["linger.ms=20"], Some(path.clone()));
        let mut c = ClientConfig::new();
        k.apply(&mut c).expect("valid");
        assert_eq!(c.get("security.protocol"), Some("SASL_PLAINTEXT"));
        assert_eq!(c.get("bootstrap.servers"), Some("a:1,b:2"));
        assert_eq!(
            c.get("linger.ms"),
            Some("20"),
            "the flag wins over the file"
        );
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn bad_file_lines_are_named_by_number_without_their_content() {
        let path = temp_file("bad.properties", "a=1\n\nsasl.password hunter2\n");
        let e = kafka(&[], Some(path.clone()))
            .settings()
            .expect_err("line 3 has no '='");
        let text = e.to_string();
        assert!(text.contains("line 3: no '='"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
        let _ = std::fs::remove_file(&path);
        let e = kafka(&[], Some(path.clone()))
            .settings()
            .expect_err("the file is gone");
        assert!(matches!(e, BadKafkaConfig::Read { .. }), "{e}");
        assert!(e.to_string().contains(&path.display().to_string()));
        assert_eq!(
            parse_properties(" =v"),
            Err((1, "empty key (expected key=value)"))
        );
    }

    #[test]
    fn a_bad_entry_is_rejected_by_position_and_a_secret_one_is_not_echoed() {
        let e = kafka(&["a=b", "novalue"], None)
            .settings()
            .expect_err("novalue has no '='");
        assert_eq!(
            e.to_string(),
            "--kafka-config entry 2 (<redacted>) is not KEY=VALUE",
            "an entry without '=' may be a mistyped secret"
        );
        let e = kafka(&["sasl.password:hunter2"], None)
            .settings()
            .expect_err("':' is not '='");
        assert!(!e.to_string().contains("hunter2"), "{e}");
        assert!(e.to_string().contains(REDACTED), "{e}");
    }

    #[test]
    fn secrets_are_redacted_in_descriptions_and_debug_output() {
        let jaas = format!("sasl.jaas.config={JAAS}");
        let k = kafka(
            &[
                "security.protocol=SASL_PLAINTEXT",
                "sasl.password=hunter2",
                &jaas,
                "ssl.key.pem=-----BEGIN KEY-----",
                "sasl.oauthbearer.client.secret=s3",
            ],
            None,
        );
        let described = k.describe().expect("valid");
        let debug = format!("{k:?}");
        let mut c = ClientConfig::new();
        k.apply(&mut c).expect("valid");
        let config_debug = format!("{:?}", RedactedConfig(&c));
        for shown in [&described, &debug, &config_debug] {
            for secret in ["hunter2", "p,w=1", "BEGIN KEY", "s3"] {
                assert!(!shown.contains(secret), "{secret} in {shown}");
            }
            assert!(shown.contains("SASL_PLAINTEXT"), "{shown}");
        }
        assert!(
            described.contains("sasl.password=<redacted>"),
            "{described}"
        );
        assert_eq!(kafka(&[], None).describe().expect("none"), "none");
    }

    #[test]
    fn secret_keys_are_recognised() {
        for key in [
            "sasl.password",
            "SASL.PASSWORD",
            "sasl.jaas.config",
            "ssl.key.password",
            "ssl.key.pem",
            "ssl.keystore.location",
            "ssl_key",
            "sasl.oauthbearer.client.secret",
            "sasl.oauthbearer.config",
            "sasl.oauthbearer.token.endpoint.url",
        ] {
            assert!(is_secret_key(key), "{key}");
        }
        for key in [
            "bootstrap.servers",
            "security.protocol",
            "sasl.mechanism",
            "sasl.username",
            "ssl.ca.location",
            "ssl.certificate.location",
            "linger.ms",
        ] {
            assert!(!is_secret_key(key), "{key}");
        }
    }
}
