//! Command-line flags shared by several subcommands (flattened into their `Args` with
//! `#[command(flatten)]`), so a flag has one name, one `DKG_*` variable and one meaning everywhere.

use dkg_partitioner::kafka::DEFAULT_CONTROL_TOPIC;
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

    /// Extra librdkafka settings for every client (security, timeouts), e.g.
    /// `security.protocol=SASL_SSL`; repeat the flag or separate with commas in the variable.
    #[arg(
        long = "kafka-config",
        env = "DKG_KAFKA_CONFIG",
        value_delimiter = ',',
        value_name = "KEY=VALUE"
    )]
    pub kafka_config: Vec<String>,
}

/// A `--kafka-config` entry that is not `KEY=VALUE`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not KEY=VALUE")]
pub struct BadKafkaConfig(pub String);

impl ClusterArgs {
    /// The base client configuration: the bootstrap servers, `client.id`, then every `--kafka-config`
    /// entry (last, so a user's setting wins, `client.id` included).
    pub fn client_config(&self, client_id: &str) -> Result<ClientConfig, BadKafkaConfig> {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap_servers);
        config.set("client.id", client_id);
        for kv in &self.kafka_config {
            let Some((k, v)) = kv.split_once('=') else {
                return Err(BadKafkaConfig(kv.clone()));
            };
            config.set(k.trim(), v.trim());
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(kafka_config: &[&str]) -> ClusterArgs {
        ClusterArgs {
            bootstrap_servers: "b:9092".into(),
            topic: "t".into(),
            control_topic: DEFAULT_CONTROL_TOPIC.into(),
            kafka_config: kafka_config.iter().map(|s| (*s).to_owned()).collect(),
        }
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
    fn an_entry_without_equals_is_rejected_by_name() {
        let e = args(&["a=b", "novalue"])
            .client_config("x")
            .expect_err("novalue has no '='");
        assert_eq!(e, BadKafkaConfig("novalue".into()));
        assert!(e.to_string().contains("\"novalue\""));
    }
}
