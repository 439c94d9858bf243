//! `dkg-sampler retract`: take a topic's assignment off the control topic, so producers return
//! to Kafka's default placement.
//!
//! Reads the control topic to its end with the producers' validation
//! ([`dkg_partitioner::kafka::AssignmentBook`]), then writes, with a plain idempotent producer:
//! with `--control-format v1` a tombstone (every reader understands it; it also clears the epoch
//! floor, `docs/spec.md` 6.3), with `v2` a retraction document one epoch above the topic's
//! current one, naming the generation in force, whose epoch stays the topic's floor after
//! compaction and restarts (`docs/spec.md` 6.4). A running `dkg-sampler run` of the topic
//! publishes again at its next interval: stop it first.

use std::time::Duration;

use clap::Parser;
use dkg_partitioner::assignment::Retraction;
use dkg_partitioner::kafka::{
    ControlTopicReader, publish_retraction, publisher_config, retract_assignment,
};
use rdkafka::producer::FutureProducer;

use crate::cli::{BadKafkaConfig, ClusterArgs, ControlFormat, ControlFormatArgs};

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
    /// Reading or writing the control topic failed.
    #[error("{what} control topic {control_topic:?}: {source}")]
    Kafka {
        /// Reading or writing.
        what: &'static str,
        /// The control topic.
        control_topic: String,
        /// The cause.
        #[source]
        source: dkg_partitioner::Error,
    },
    /// A `--kafka-config` entry is malformed.
    #[error("{0}")]
    KafkaConfig(#[from] BadKafkaConfig),
    /// The async runtime could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[from] std::io::Error),
}

/// Run `retract`: print what was written on stdout.
pub fn run(args: Args) -> Result<(), RetractError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let done = runtime.block_on(retract(&args))?;
    println!("{done}");
    Ok(())
}

async fn retract(args: &Args) -> Result<String, RetractError> {
    let cluster = &args.cluster;
    let topic = &cluster.topic;
    let control_topic = &cluster.control_topic;
    let timeout = Duration::from_secs(args.timeout_secs);
    let failed = |what| {
        move |source| RetractError::Kafka {
            what,
            control_topic: control_topic.clone(),
            source,
        }
    };
    let connection = cluster.client_config("dkg-sampler-retract")?;
    let mut reader =
        ControlTopicReader::new(&connection, control_topic).map_err(failed("reading"))?;
    reader
        .catch_up(timeout, |_| {})
        .await
        .map_err(failed("reading"))?;
    let book = reader.book();
    let producer: FutureProducer = publisher_config(&connection)
        .create()
        .map_err(|e| failed("writing")(dkg_partitioner::Error::Kafka(e)))?;
    match args.format.control_format {
        ControlFormat::V1 => {
            retract_assignment(&producer, control_topic, topic, timeout)
                .await
                .map_err(failed("writing"))?;
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
                .map_err(failed("writing"))?;
            Ok(format!(
                "retracted topic {topic:?} at epoch {} (the floor of later epochs) on {control_topic:?}",
                retraction.epoch
            ))
        }
    }
}
