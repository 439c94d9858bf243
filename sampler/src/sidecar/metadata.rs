//! The data topic's partition count from the broker's metadata: asked at start-up ([`super::startup`],
//! which waits for the topic) and at every interval ([`super::interval`], which follows partition
//! growth). Its own file so that those two share it without importing each other.

use std::sync::Arc;
use std::time::Duration;

use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use rdkafka::types::RDKafkaRespErr;

/// Why the topic's metadata is not usable.
#[derive(Debug)]
pub(super) enum TopicProblem {
    Unreachable(String),
    Missing,
    Other(String),
}

pub(super) async fn topic_partitions(
    admin: &Arc<AdminClient<DefaultClientContext>>,
    topic: &str,
) -> Result<u32, TopicProblem> {
    let admin = Arc::clone(admin);
    let topic = topic.to_owned();
    let res = tokio::task::spawn_blocking(move || {
        admin
            .inner()
            .fetch_metadata(Some(&topic), Duration::from_secs(5))
            .map(|md| {
                md.topics()
                    .iter()
                    .find(|t| t.name() == topic)
                    .map(|t| (t.error(), t.partitions().len()))
            })
    })
    .await
    .map_err(|e| TopicProblem::Other(format!("metadata task: {e}")))?;
    match res {
        Ok(Some((None, n))) if n > 0 => Ok(u32::try_from(n).unwrap_or(u32::MAX)),
        Ok(Some((Some(RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART), _)))
        | Ok(Some((None, _)))
        | Ok(None) => Err(TopicProblem::Missing),
        Ok(Some((Some(e), _))) => Err(TopicProblem::Other(format!("{e:?}"))),
        Err(e) => Err(TopicProblem::Unreachable(e.to_string())),
    }
}
