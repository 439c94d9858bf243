//! Epochs strictly increase across restarts on the real broker: each start reads the control topic (after
//! taking the transactional id) and continues from the highest epoch there, whoever published it.

mod common;

use std::time::Duration;

use common::*;
use dkg_partitioner::Assignment;
use dkg_testkit::fixtures::assignment;

fn foreign_assignment(topic: &str, epoch: u64) -> Assignment {
    // Another publisher's document: its own bucket layout (8 buckets), not the sampler's.
    assignment(topic, 4, epoch, (0..8).map(|b| b % 4).collect(), &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn epochs_continue_from_the_control_topic_after_every_restart() {
    let topic = unique_topic("sampler-restart");
    create_topic(&bootstrap(), &topic, 4, &[]).await;
    publish_raw(&foreign_assignment(&topic, 41)).await;
    let workload = Workload::start(WorkloadSpec {
        topic: topic.clone(),
        alpha: 1.0,
        keys: 1_000,
        records_per_second: 10_000,
        dkg: true,
        seed: 5,
    })
    .await;

    tokio::task::block_in_place(|| {
        let once = || {
            let mut s = Sampler::start("once", &topic, &["--once", "--interval-secs", "1"]);
            let status = s.wait_exit(Duration::from_secs(60));
            assert!(
                status.success(),
                "--once exits 0 after publishing: {status}\n{}",
                s.log()
            );
        };
        once();
        assert_eq!(epochs(&read_control_topic(&topic, true)), vec![41, 42]);
        once();
        assert_eq!(epochs(&read_control_topic(&topic, true)), vec![41, 42, 43]);

        // A long-running instance, stopped with SIGTERM: graceful, exit 0.
        let mut s = Sampler::start("long", &topic, &["--interval-secs", "1"]);
        wait_for("two intervals", Duration::from_secs(30), || {
            (s.intervals() >= 2).then_some(())
        });
        assert!(
            s.health().expect("health")["epoch"].as_u64() >= Some(43),
            "it read the current epoch"
        );
        let status = s.terminate(Duration::from_secs(30));
        assert!(status.success(), "SIGTERM: graceful exit 0, got {status}");
        assert!(s.log().contains("dkg-sampler run stopped"));

        let before = *epochs(&read_control_topic(&topic, true))
            .last()
            .expect("epochs");
        once();
        let after = epochs(&read_control_topic(&topic, true));
        assert_strictly_increasing(&after);
        assert_eq!(*after.last().expect("epochs"), before + 1, "{after:?}");
    });
    workload.stop().await;
}
