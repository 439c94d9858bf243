//! Fencing on the real broker: two samplers for one topic in DIFFERENT consumer groups (so each believes it is
//! the leader) share one transactional id. The later one's `init_transactions` fences the earlier one: the
//! zombie's next publish fails, it says so (log and /healthz) and stops publishing for good, and the epochs
//! producers see (read_committed) never conflict.
//!
//! Every step is triggered by an event, not by the stream's noise or the machine's pace. Both samplers run
//! with a huge `--imbalance-threshold`: with an assignment in force neither ever republishes, so the zombie
//! cannot have tried (and found out) before the test makes it. The trigger is a retraction: with no
//! assignment the zombie publishes a first epoch at once and is fenced, while the usurper, started with an
//! unreachable `--first-epoch-noise`, holds the transactional id and waits (its first-epoch wait is 300 s).
//! Then the usurper restarts with the suite's first-epoch rule (same group, same transactional id) and
//! publishes the next epoch; the zombie follows it and stays fenced.

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
        records_per_second: 20_000,
        ..WorkloadSpec::zipf(&topic, 3)
    })
    .await;
    let group_a = format!("{topic}.a");
    let group_b = format!("{topic}.b");
    let publishes = |s: &Sampler| {
        s.metric("dkg_sampler_publishes_total", &[("topic", &topic)])
            .unwrap_or(-1.0)
    };
    let epoch = |s: &Sampler| s.health().and_then(|h| h["epoch"].as_u64()).unwrap_or(0);
    let flags = |group: &str, first_epoch_noise: &'static str| {
        [
            "--interval-secs",
            "1",
            "--group-id",
            group,
            "--transactional-id",
            &txn,
            "--imbalance-threshold",
            "1000",
            "--first-epoch-noise",
            first_epoch_noise,
        ]
        .map(str::to_owned)
    };
    let start = |name: &str, flags: &[String]| {
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        Sampler::start(name, &topic, &flags)
    };

    // The suite's first-epoch rule (DKG_FIRST_EPOCH_NOISE=1): a first epoch on --min-samples.
    let a = start("zombie", &flags(&group_a, "1"));
    tokio::task::block_in_place(|| {
        wait_for("A's first assignment", Duration::from_secs(60), || {
            (epoch(&a) >= 1).then_some(())
        });
    });
    let mut b = start("usurper", &flags(&group_b, "0.000001"));
    tokio::task::block_in_place(|| {
        wait_for(
            "B to hold the transactional id",
            Duration::from_secs(60),
            || (publisher(&b)? == "active").then_some(()),
        );
        // Deterministic: with an assignment in force A never republishes (its threshold).
        assert_eq!(
            publisher(&a).as_deref(),
            Some("active"),
            "A does not know yet: it has not tried to publish"
        );
        assert_eq!(publishes(&a), 1.0);
    });

    // A retraction: A wants to publish a first epoch and finds out; B waits for a window it never
    // gets.
    retract_raw(&topic).await;
    tokio::task::block_in_place(|| {
        wait_for("A to be fenced", Duration::from_secs(60), || {
            (publisher(&a)? == "fenced").then_some(())
        });
        assert!(
            a.log().contains("FENCED"),
            "the zombie says clearly that it was fenced"
        );
        assert_eq!(publishes(&a), 1.0, "the fenced attempt is not a publish");
        assert_eq!(publishes(&b), 0.0, "B's first-epoch rule keeps it waiting");
        assert_eq!(publisher(&b).as_deref(), Some("active"));
        let status = b.terminate(Duration::from_secs(60));
        assert!(status.success(), "B stops gracefully: {status}");
    });

    // B again, with the suite's first-epoch rule: the holder publishes the next epoch; A at most
    // logs that it would.
    let b = start("usurper-again", &flags(&group_b, "1"));
    tokio::task::block_in_place(|| {
        wait_for(
            "B's publish after the retraction",
            Duration::from_secs(60),
            || (publishes(&b) >= 1.0).then_some(()),
        );
        let b_epoch = epoch(&b);
        assert_eq!(
            b_epoch, 2,
            "epochs continue after a retraction, above every epoch ever read"
        );
        wait_for("A to follow B's epoch", Duration::from_secs(60), || {
            (a.assignment()?.epoch() == b_epoch).then_some(())
        });
        // Two more of A's decisions after it saw B's epoch: it keeps running, still fenced.
        let seen_at = a.intervals();
        wait_for("A to keep running", Duration::from_secs(60), || {
            (a.intervals() >= seen_at + 2).then_some(())
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
