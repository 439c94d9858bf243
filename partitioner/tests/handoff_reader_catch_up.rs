//! `HandoffReader::catch_up` returns as soon as the reader is at the end of the handoff topic: also
//! when called again with nothing new (librdkafka emits its end-of-partition event only once), and
//! for a handoff topic that does not exist yet (read as empty).
#![cfg(feature = "kafka")]
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::producer::client_config;
use dkg_kafka::kafka::handoff::{HandoffEntry, HandoffReader};
use dkg_kafka::kafka::handoff::{HandoffWriter, Progress, ensure_handoff_topic};
use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catch_up_returns_at_the_end_also_when_nothing_is_new() {
    let bootstrap = common::bootstrap();
    let config = client_config(&bootstrap);

    // Not created yet: empty, at once.
    let missing = common::unique_topic("handoff-missing");
    let mut reader = HandoffReader::new(&config, &missing).unwrap();
    let read = promptly(&mut reader, |r| panic!("no record expected, got {r:?}")).await;
    assert_eq!(read, 0);

    let topic = common::unique_topic("handoff-catch-up");
    let admin: AdminClient<DefaultClientContext> = config.create().unwrap();
    ensure_handoff_topic(&admin, &topic, 1).await.unwrap();
    let writer = HandoffWriter::new(&config, &topic).unwrap();
    for drained in 1..=2 {
        writer.put_progress(&progress(drained)).await.unwrap();
    }

    let mut reader = HandoffReader::new(&config, &topic).unwrap();
    let mut drained = Vec::new();
    let read = promptly(&mut reader, |r| {
        drained.push((r.offset, drained_of(r.entry)))
    })
    .await;
    assert_eq!(read, 2);
    assert_eq!(
        drained,
        vec![(0, 1), (1, 2)],
        "both records read, once each"
    );

    // Nothing new, twice: neither call may wait for an end-of-partition event that never comes.
    for _ in 0..2 {
        let read = promptly(&mut reader, |r| panic!("no new record expected, got {r:?}")).await;
        assert_eq!(read, 0);
    }

    // Something new: read exactly it, then nothing again.
    writer.put_progress(&progress(3)).await.unwrap();
    let mut drained = Vec::new();
    let read = promptly(&mut reader, |r| {
        drained.push((r.offset, drained_of(r.entry)))
    })
    .await;
    assert_eq!(read, 1);
    assert_eq!(drained, vec![(2, 3)]);
    let read = promptly(&mut reader, |r| panic!("no new record expected, got {r:?}")).await;
    assert_eq!(read, 0);
}

/// One `catch_up` with a long timeout that must return well before it (the fault is waiting for
/// the whole timeout; half of it is far beyond any machine's pace).
async fn promptly(
    reader: &mut HandoffReader,
    on_record: impl FnMut(dkg_kafka::kafka::handoff::HandoffRecord),
) -> usize {
    let started = Instant::now();
    let read = reader
        .catch_up(Duration::from_secs(120), on_record)
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "catch-up took {:?}",
        started.elapsed()
    );
    read
}

fn progress(drained: u64) -> Progress {
    Progress {
        group: "g".into(),
        topic: "orders".into(),
        partition: 0,
        drained,
        passed: Default::default(),
        committed_offset: 0,
        updated_at_ms: 1,
    }
}

fn drained_of(entry: Result<HandoffEntry, String>) -> u64 {
    match entry.unwrap() {
        HandoffEntry::Progress(p) => p.drained,
        other => panic!("expected progress, got {other:?}"),
    }
}
