//! `dkg-sampler inspect`: print a topic's current assignment from the control topic.
//!
//! Reads the control topic from the beginning to its end with the same validation producers apply
//! ([`dkg_kafka::kafka::control::AssignmentBook`]), so what it prints is exactly what a `DkgProducer`
//! started now would route by. Read-only: it never creates the control topic.

use std::time::Duration;

use clap::Parser;
use dkg_kafka::kafka::control::ControlTopicReader;

use crate::cli::{BadKafkaConfig, ClusterArgs};

/// Print the current DKG assignment of a topic as JSON.
#[derive(Debug, Parser)]
#[command(
    after_help = "Examples:\n  dkg-sampler inspect --bootstrap-servers 127.0.0.1:9092 --topic orders\n  \
                  dkg-sampler inspect --bootstrap-servers 127.0.0.1:9092 --topic orders --control-topic my.assignments"
)]
pub struct Args {
    /// The cluster, the data topic whose assignment to print and the control topic to read.
    #[command(flatten)]
    pub cluster: ClusterArgs,

    /// Give up reading the control topic to its end after this many seconds.
    #[arg(long, env = "DKG_INSPECT_TIMEOUT_SECS", default_value_t = 30)]
    pub timeout_secs: u64,
}

/// Errors of `dkg-sampler inspect`.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// The control topic holds no (valid) assignment for the topic.
    #[error(
        "no assignment for topic {topic:?} on control topic {control_topic:?} ({records} control \
         records read): none was published yet, it was retracted, or every publication was rejected \
         (see the warnings above)"
    )]
    NoAssignment {
        /// The data topic.
        topic: String,
        /// The control topic read.
        control_topic: String,
        /// Records read from the control topic.
        records: usize,
    },
    /// The broker did not answer within the timeout (`--timeout-secs`).
    #[error("cannot reach the Kafka broker at {bootstrap} within {secs} s: {cause}")]
    Unreachable {
        /// `--bootstrap-servers`.
        bootstrap: String,
        /// Seconds waited.
        secs: u64,
        /// The client's error.
        cause: String,
    },
    /// The control topic does not exist (a misspelt `--control-topic`, or nothing was published).
    #[error(
        "control topic {control_topic:?} does not exist on {bootstrap} (check --control-topic; the \
         sampler creates it at its first start)"
    )]
    MissingControlTopic {
        /// The control topic.
        control_topic: String,
        /// `--bootstrap-servers`.
        bootstrap: String,
    },
    /// Reading the control topic failed.
    #[error("reading control topic {control_topic:?}: {source}")]
    Read {
        /// The control topic.
        control_topic: String,
        /// The cause.
        #[source]
        source: dkg_kafka::Error,
    },
    /// A `--kafka-config` entry is malformed.
    #[error("{0}")]
    KafkaConfig(#[from] BadKafkaConfig),
    /// The async runtime could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[from] std::io::Error),
}

/// Run `inspect`: print the assignment as pretty JSON on stdout, or fail with
/// [`InspectError::NoAssignment`] (exit status 1).
pub fn run(args: Args) -> Result<(), InspectError> {
    let json = block_on(current_assignment_json(&args))?;
    println!("{json}");
    Ok(())
}

/// Run `f` on a current-thread runtime (the control-topic tools are one short conversation).
pub(crate) fn block_on<T, E: From<InspectError>>(
    f: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(InspectError::Runtime)?;
    runtime.block_on(f)
}

/// A reader of `cluster`'s control topic that has read it to its end (within `timeout`), with
/// the records read; `client_id` names the tool's clients.
pub(crate) async fn read_control_topic(
    cluster: &ClusterArgs,
    client_id: &str,
    timeout: Duration,
) -> Result<(ControlTopicReader, usize), InspectError> {
    let read_error = |source| InspectError::Read {
        control_topic: cluster.control_topic.clone(),
        source,
    };
    let connection = cluster.client_config(client_id)?;
    probe_control_topic(cluster, &connection, timeout).await?;
    let mut reader =
        ControlTopicReader::new(&connection, &cluster.control_topic).map_err(read_error)?;
    let records = reader.catch_up(timeout, |_| {}).await.map_err(read_error)?;
    Ok((reader, records))
}

/// Fail fast, naming the broker: is it reachable, and does the control topic exist? A metadata
/// request of a reader (`allow.auto.create.topics=false`, so it never creates the topic; the
/// reader's own ACLs suffice), bounded by `timeout`.
async fn probe_control_topic(
    cluster: &ClusterArgs,
    connection: &rdkafka::ClientConfig,
    timeout: Duration,
) -> Result<(), InspectError> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let bootstrap = cluster.bootstrap_servers.clone();
    let config = dkg_kafka::kafka::topic::reader_config(
        &dkg_kafka::kafka::control::connection_config(connection),
        "dkg-control-reader",
    );
    let consumer: BaseConsumer = config.create().map_err(|e| InspectError::Unreachable {
        bootstrap: bootstrap.clone(),
        secs: 0,
        cause: e.to_string(),
    })?;
    let topic = cluster.control_topic.clone();
    let probe = tokio::task::spawn_blocking(move || {
        consumer.fetch_metadata(Some(&topic), timeout).map(|md| {
            md.topics()
                .iter()
                .find(|t| t.name() == topic)
                .map(|t| (t.error(), t.partitions().len()))
        })
    })
    .await
    .map_err(|e| InspectError::Unreachable {
        bootstrap: bootstrap.clone(),
        secs: timeout.as_secs(),
        cause: format!("metadata task: {e}"),
    })?;
    match probe {
        Ok(Some((None, n))) if n > 0 => Ok(()),
        Ok(Some((Some(e), _)))
            if e != rdkafka::types::RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART =>
        {
            // Authorization and the like: the reader names it below.
            tracing::debug!("control topic metadata: {e:?}");
            Ok(())
        }
        Ok(_) => Err(InspectError::MissingControlTopic {
            control_topic: cluster.control_topic.clone(),
            bootstrap,
        }),
        Err(e) => Err(InspectError::Unreachable {
            bootstrap,
            secs: timeout.as_secs(),
            cause: e.to_string(),
        }),
    }
}

async fn current_assignment_json(args: &Args) -> Result<String, InspectError> {
    let cluster = &args.cluster;
    let timeout = Duration::from_secs(args.timeout_secs);
    let (reader, records) = read_control_topic(cluster, "dkg-sampler-inspect", timeout).await?;
    match reader.book().get(&cluster.topic) {
        Some(assignment) => Ok(assignment.to_json_pretty()),
        None => Err(InspectError::NoAssignment {
            topic: cluster.topic.clone(),
            control_topic: cluster.control_topic.clone(),
            records,
        }),
    }
}
