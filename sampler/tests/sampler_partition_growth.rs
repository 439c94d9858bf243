//! A partition-count change on the real broker: the sampler notices it, starts a new window once the group
//! consumes every new partition, and publishes an assignment for the new count (producers fall back to
//! Kafka's hashing meanwhile).

mod common;

use std::time::Duration;

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_partitions_lead_to_a_new_window_and_an_assignment_for_the_new_count() {
    let (topic, workload) = topic_with_workload("sampler-growth", 3, 13).await;
    let s = Sampler::start("growth", &topic, &["--interval-secs", "1"]);
    let first = tokio::task::block_in_place(|| s.wait_assignment(Duration::from_secs(30)));
    assert_eq!(first.partitions(), 3);

    grow_partitions(&topic, 6).await;

    let grown = tokio::task::block_in_place(|| s.wait_assignment_for(6, Duration::from_secs(60)));
    assert!(grown.epoch() > first.epoch());
    let log = s.log();
    assert!(log.contains("partition count changed"), "{log}");
    assert!(
        log.contains("partition count changed from 3 to 6"),
        "the publish names its reason"
    );
    let h = s.health().expect("health");
    assert_eq!(h["partitions"], 6);
    assert_eq!(
        h["owned"].as_array().map(Vec::len),
        Some(6),
        "the group consumes the new partitions"
    );
    let published = read_control_topic(&topic, true);
    assert_strictly_increasing(&epochs(&published));
    let last = published
        .last()
        .and_then(|r| r.assignment.clone())
        .expect("last document");
    assert_eq!(last.partitions(), 6);
    // The misplacement detector (issue 31 item 5) allows for the change: records placed by Kafka's
    // hashing over either count while producers and the sampler learn it are not misplaced, nor
    // those of the assignment for the new count. Counted until two intervals after it.
    let label = [("topic", topic.as_str())];
    let (checked, misplaced, unsettled) = tokio::task::block_in_place(|| {
        let until = s.intervals() + 2;
        wait_for("two more intervals", Duration::from_secs(30), || {
            (s.intervals() >= until).then_some(())
        });
        let m = s.metrics();
        let get = |name, extra: Option<(&str, &str)>| {
            let labels: Vec<(&str, &str)> = label.iter().copied().chain(extra).collect();
            find(&m, name, &labels).unwrap_or(0.0)
        };
        (
            get("dkg_sampler_placement_checked_records_total", None),
            get("dkg_sampler_misplaced_records_total", None),
            get(
                "dkg_sampler_placement_unchecked_records_total",
                Some(("reason", "count_changed")),
            ),
        )
    });
    eprintln!("misplaced: {misplaced} of {checked} checked; {unsettled} unchecked (count changed)");
    assert!(
        checked > 0.0 && misplaced / checked < 0.005,
        "misplaced {misplaced} of {checked}: {}",
        s.log()
    );
    drop(s);
    workload.stop().await;
}
