//! The flags every lab tool that talks to one Kafka cluster takes the same way.

use dkg_sampler::cli::{BadKafkaConfig, KafkaConfigArgs};
use rdkafka::config::ClientConfig;

/// The cluster to talk to: its bootstrap servers and the extra client settings.
#[derive(Debug, clap::Args)]
pub struct Connection {
    /// Kafka bootstrap servers (host:port[,host:port...]).
    #[arg(long, env = "DKG_BOOTSTRAP_SERVERS")]
    pub bootstrap_servers: String,

    /// Extra librdkafka settings for every client (security, timeouts).
    #[command(flatten)]
    pub kafka: KafkaConfigArgs,
}

impl Connection {
    /// The bootstrap servers with `settings` on top, then the `--kafka-config` entries (last, so a
    /// user's setting wins).
    pub fn client_config(&self, settings: &[(&str, &str)]) -> Result<ClientConfig, BadKafkaConfig> {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap_servers);
        for (key, value) in settings {
            config.set(*key, *value);
        }
        self.kafka.apply(&mut config)?;
        Ok(config)
    }
}
