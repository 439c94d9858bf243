//! A one-shot run never takes over a live sidecar (issue 31, finding 2) on the real broker.
//!
//! On main `run --once` took the sidecar's transactional id: the sidecar was fenced, `/healthz` still
//! said "running", and after a partition-count change nobody published. Now `--once` publishes under a
//! transactional id of its own (`--help`), so the sidecar stays the publisher: it reads the one-shot
//! epoch, and after the topic grows it publishes the assignment for the new count above it.

mod common;

use std::time::Duration;

use common::*;
use dkg_partitioner::Assignment;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_once_run_beside_a_sidecar_leaves_it_publishing() {
    let (topic, workload) = topic_with_workload("sampler-once-beside", 3, 17).await;
    let s = Sampler::start("sidecar", &topic, &["--interval-secs", "1"]);
    let first = tokio::task::block_in_place(|| s.wait_assignment(Duration::from_secs(60)));

    let once_epoch = tokio::task::block_in_place(|| {
        Sampler::run_once("once", &topic);
        let epoch = wait_for(
            "the sidecar to read the one-shot epoch",
            Duration::from_secs(20),
            || {
                let e = s.health()?["epoch"].as_u64()?;
                (e > first.epoch()).then_some(e)
            },
        );
        // A few intervals: the sidecar is not fenced and says it runs.
        let intervals = s.intervals();
        wait_for("three more intervals", Duration::from_secs(30), || {
            (s.intervals() >= intervals + 3).then_some(())
        });
        let h = s.health().expect("health");
        assert_eq!(h["publisher"], "active", "{h}");
        assert_eq!(h["state"], "running", "{h}");
        assert!(!s.log().contains("FENCED"), "{}", s.log());
        epoch
    });

    grow_partitions(&topic, 5).await;
    let grown = tokio::task::block_in_place(|| s.wait_assignment_for(5, Duration::from_secs(90)));
    assert!(grown.epoch() > once_epoch, "above the one-shot epoch");
    let published = read_control_topic(&topic, true);
    assert_strictly_increasing(&epochs(&published));
    assert_eq!(
        published
            .last()
            .and_then(|r| r.assignment.as_ref())
            .map(Assignment::partitions),
        Some(5),
        "the sidecar's document for 5 partitions is in force"
    );
    drop(s);
    workload.stop().await;
}
