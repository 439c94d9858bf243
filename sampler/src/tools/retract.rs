//! `dkg-sampler retract`: take a topic's assignment off the control topic, so producers return
//! to Kafka's default placement.
//!
//! Reads the control topic to its end with the producers' validation
//! ([`dkg_kafka::kafka::control::AssignmentBook`]), then writes, with a plain idempotent producer:
//! with `--control-format v1` a tombstone (every reader understands it; it also clears the epoch
//! floor, `docs/spec.md` 6.3), with `v2` a retraction document one epoch above the topic's
//! current one, naming the generation in force, whose epoch stays the topic's floor after
//! compaction and restarts (`docs/spec.md` 6.4). A running `dkg-sampler run` of the topic
//! publishes again at its next interval: stop it first.

use std::time::Duration;

use clap::Parser;
use dkg_kafka::kafka::control::{publish_retraction, publisher_config, retract_assignment};
use dkg_kafka_core::assignment::Retraction;
use rdkafka::producer::FutureProducer;

use super::inspect::{InspectError, block_on, read_control_topic};
use crate::cli::{ClusterArgs, ControlFormat, ControlFormatArgs};

/// Retract a topic's DKG assignment: producers return to Kafka's default placement.
#[derive(Debug, Parser)]
#[command(
    after_help = "Stop the topic's `dkg-sampler run` first, or it publishes again at its next interval.\n\n\
                  Examples:\n  dkg-sampler retract --bootstrap-servers 127.0.0.1:9092 --topic orders\n  \
                  dkg-sampler retract --bootstrap-servers 127.0.0.1:9092 --topic orders --control-format v2"
)]
pub struct Args {
    /// The cluster, the data topic whose assignment to retract and the control topic.
    #[command(flatten)]
    pub cluster: ClusterArgs,

    /// `v1`: a tombstone; `v2`: a retraction document that keeps the epoch.
    #[command(flatten)]
    pub format: ControlFormatArgs,

    /// Give up reading the control topic to its end, or waiting for the broker's acknowledgement,
    /// after this many seconds.
    #[arg(long, env = "DKG_RETRACT_TIMEOUT_SECS", default_value_t = 30)]
    pub timeout_secs: u64,
}

/// Errors of `dkg-sampler retract`.
#[derive(Debug, thiserror::Error)]
pub enum RetractError {
    /// `--control-format v2` and the topic has neither an assignment nor a floor.
    #[error(
        "topic {topic:?} has no assignment on control topic {control_topic:?}: nothing to retract \
         (a tombstone, --control-format v1, removes its entry anyway)"
    )]
    NothingToRetract {
        /// The data topic.
        topic: String,
        /// The control topic read.
        control_topic: String,
    },
    /// Reading the control topic failed (or the settings or the runtime), as for `inspect`.
    #[error(transparent)]
    Read(#[from] InspectError),
    /// Writing the record failed.
    #[error("writing control topic {control_topic:?}: {source}")]
    Write {
        /// The control topic.
        control_topic: String,
        /// The cause.
        #[source]
        source: dkg_kafka::Error,
    },
}

/// Run `retract`: print what was written on stdout.
pub fn run(args: Args) -> Result<(), RetractError> {
    let done = block_on(retract(&args))?;
    println!("{done}");
    Ok(())
}

async fn retract(args: &Args) -> Result<String, RetractError> {
    let cluster = &args.cluster;
    let topic = &cluster.topic;
    let control_topic = &cluster.control_topic;
    let timeout = Duration::from_secs(args.timeout_secs);
    let failed = |source| RetractError::Write {
        control_topic: control_topic.clone(),
        source,
    };
    let (reader, _) = read_control_topic(cluster, "dkg-sampler-retract", timeout).await?;
    let book = reader.book();
    let connection = cluster
        .client_config("dkg-sampler-retract")
        .map_err(InspectError::from)?;
    let producer: FutureProducer = publisher_config(&connection)
        .create()
        .map_err(|e| failed(dkg_kafka::Error::Kafka(e)))?;
    match args.format.control_format {
        ControlFormat::V1 => {
            retract_assignment(&producer, control_topic, topic, timeout)
                .await
                .map_err(failed)?;
            Ok(format!(
                "retracted topic {topic:?} with a tombstone on {control_topic:?}"
            ))
        }
        ControlFormat::V2 => {
            let Some(current) = book.get(topic) else {
                return match book.retraction(topic) {
                    Some(floor) => Ok(format!(
                        "topic {topic:?} is already retracted at epoch {} on {control_topic:?}",
                        floor.epoch
                    )),
                    None => Err(RetractError::NothingToRetract {
                        topic: topic.clone(),
                        control_topic: control_topic.clone(),
                    }),
                };
            };
            // One above the assignment's epoch: at it the retraction would be an epoch_conflict.
            let retraction = Retraction {
                topic: topic.clone(),
                epoch: current.epoch() + 1,
                generation: book.generation().map(str::to_owned),
                created_at_ms: crate::sidecar::now_ms(),
            };
            publish_retraction(&producer, control_topic, &retraction, timeout)
                .await
                .map_err(failed)?;
            Ok(format!(
                "retracted topic {topic:?} at epoch {} (the floor of later epochs) on {control_topic:?}",
                retraction.epoch
            ))
        }
    }
}
