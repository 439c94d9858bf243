//! Fencing on the real broker: two samplers for one topic in DIFFERENT consumer groups (so each believes it is
//! the leader) share one transactional id. The later one's `init_transactions` fences the earlier one: the
//! zombie's next publish fails, it says so (log and /healthz) and stops publishing for good, and the epochs
//! producers see (read_committed) never conflict.
//!
//! The second sampler runs with a huge `--imbalance-threshold`, so it holds the transactional id without
//! republishing on drift; that makes the zombie the one that tries (deterministically). A retraction then
//! makes the second sampler publish.

mod common;

use std::time::Duration;

use common::*;

fn publisher(s: &Sampler) -> Option<String> {
    s.health()
        .and_then(|h| h["publisher"].as_str().map(str::to_owned))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sampler_fences_the_first_and_epochs_never_conflict() {
    let topic = unique_topic("sampler-fencing");
    create_topic(&bootstrap(), &topic, 6, &[]).await;
    let txn = format!("dkg-sampler.fencing-test.{topic}");
    let workload = Workload::start(WorkloadSpec {
        topic: topic.clone(),
        alpha: 1.0,
        keys: 10_000,
        records_per_second: 20_000,
        dkg: true,
        seed: 3,
    })
    .await;
    let group_a = format!("{topic}.a");
    let group_b = format!("{topic}.b");
    let publishes = |s: &Sampler| {
        s.metric("dkg_sampler_publishes_total", &[("topic", &topic)])
            .unwrap_or(-1.0)
    };
    let epoch = |s: &Sampler| s.health().and_then(|h| h["epoch"].as_u64()).unwrap_or(0);

    let a = Sampler::start(
        "zombie",
        &topic,
        &[
            "--interval-secs",
            "1",
            "--group-id",
            &group_a,
            "--transactional-id",
            &txn,
        ],
    );
    tokio::task::block_in_place(|| {
        wait_for("A's first assignment", Duration::from_secs(30), || {
            (epoch(&a) >= 1).then_some(())
        });
    });
    let b = Sampler::start(
        "usurper",
        &topic,
        &[
            "--interval-secs",
            "1",
            "--group-id",
            &group_b,
            "--transactional-id",
            &txn,
            "--imbalance-threshold",
            "1000",
        ],
    );
    tokio::task::block_in_place(|| {
        wait_for(
            "B to hold the transactional id",
            Duration::from_secs(30),
            || (publisher(&b)? == "active").then_some(()),
        );
        assert_eq!(
            publisher(&a).as_deref(),
            Some("active"),
            "A does not know yet: it has not tried to publish"
        );
        let a_publishes = publishes(&a);
        assert_eq!(a_publishes, 1.0);

        // Drift: A wants to publish and finds out.
        workload.set_generation(1);
        wait_for("A to be fenced", Duration::from_secs(30), || {
            (publisher(&a)? == "fenced").then_some(())
        });
        assert!(
            a.log().contains("FENCED"),
            "the zombie says clearly that it was fenced"
        );
        assert_eq!(
            publishes(&a),
            a_publishes,
            "the fenced attempt is not a publish"
        );
        assert_eq!(
            publishes(&b),
            0.0,
            "B's policy keeps the current assignment"
        );
    });

    // A retraction: B (the holder) publishes the next epoch; A at most logs that it would.
    retract_raw(&topic).await;
    tokio::task::block_in_place(|| {
        wait_for(
            "B's publish after the retraction",
            Duration::from_secs(30),
            || (publishes(&b) >= 1.0).then_some(()),
        );
        let b_epoch = epoch(&b);
        assert_eq!(
            b_epoch, 2,
            "epochs continue after a retraction, above every epoch ever read"
        );
        wait_for("A to follow B's epoch", Duration::from_secs(10), || {
            (a.assignment()?.epoch() == b_epoch).then_some(())
        });
        wait_for("A to keep running", Duration::from_secs(10), || {
            (a.intervals() > 5).then_some(())
        });
        assert_eq!(
            publisher(&a).as_deref(),
            Some("fenced"),
            "no ping-pong: A stays fenced"
        );
        // Nothing A does reaches a producer: not "running" on /healthz (issue 31, finding 2).
        let h = a.health().expect("health");
        assert_eq!(h["state"], "fenced", "{h}");
        assert_eq!(a.get("/healthz").map(|(code, _)| code), Some(503));
        assert_eq!(b.health().expect("health")["state"], "running");
        assert_eq!(publisher(&b).as_deref(), Some("active"));
        assert_eq!(publishes(&a), 1.0);
    });

    // What producers read: one document per epoch, strictly increasing.
    let committed = epochs(&read_control_topic(&topic, true));
    assert_eq!(committed, vec![1, 2]);
    drop(a);
    drop(b);
    workload.stop().await;
}
