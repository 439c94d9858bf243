//! Drift and hysteresis on the real broker: the first epoch waits until the window supports its
//! prediction (2 points of sampling noise: about 71,000 sampled records over 6 partitions, 4 intervals
//! here) and says so in /healthz; with a stable key distribution the sampler publishes no new epoch over
//! ten intervals; when the hot keys change, a new epoch follows within two intervals, and it or one of the
//! next three pins the new hottest key.

mod common;

use std::time::Duration;

use common::*;

const PARTITIONS: u32 = 6;

fn epoch_of(h: &serde_json::Value) -> u64 {
    h["epoch"].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampler_follows_drift_and_holds_still_on_a_stable_distribution() {
    let topic = unique_topic("sampler-drift");
    create_topic(&bootstrap(), &topic, PARTITIONS, &[]).await;
    let workload = Workload::start(WorkloadSpec {
        topic: topic.clone(),
        alpha: 1.0,
        keys: 10_000,
        records_per_second: 20_000,
        dkg: true,
        seed: 7,
    })
    .await;
    let sampler = Sampler::start(
        "drift",
        &topic,
        &["--interval-secs", "1", "--first-epoch-noise", "0.02"],
    );

    tokio::task::block_in_place(|| {
        // First assignment, after a wait that /healthz explains.
        let mut waiting_shown = false;
        let (first_n, first_epoch) =
            wait_for("the first assignment", Duration::from_secs(30), || {
                let h = sampler.health()?;
                waiting_shown |= h["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("first epoch waits"));
                (epoch_of(&h) >= 1).then(|| (h["intervals"].as_u64().unwrap_or(0), epoch_of(&h)))
            });
        assert!(
            waiting_shown,
            "no wait shown in /healthz: {}",
            sampler.log()
        );
        assert!(
            first_n >= 3,
            "first epoch in interval {first_n}: {}",
            sampler.log()
        );
        assert!(
            sampler
                .log()
                .contains("no assignment published yet; the window's sampling noise is"),
            "{}",
            sampler.log()
        );
        // Stable distribution: ten intervals, no new epoch.
        let stable_until = first_n + 10;
        let last = wait_for("ten stable intervals", Duration::from_secs(30), || {
            let h = sampler.health()?;
            assert_eq!(
                epoch_of(&h),
                first_epoch,
                "a new epoch on a stable distribution (interval {}): {h}",
                h["intervals"]
            );
            (h["intervals"].as_u64()? >= stable_until).then_some(h)
        });
        assert_eq!(epoch_of(&last), first_epoch);
        let published = sampler
            .metric("dkg_sampler_publishes_total", &[("topic", &topic)])
            .unwrap_or(-1.0);
        assert_eq!(published, 1.0, "one publish while stable");

        // Drift: other keys become hot.
        let switched_at = sampler.intervals();
        workload.set_generation(1);
        let (changed_at, new_epoch) = wait_for(
            "a new epoch after the drift",
            Duration::from_secs(20),
            || {
                let h = sampler.health()?;
                (epoch_of(&h) > first_epoch)
                    .then(|| (h["intervals"].as_u64().unwrap_or(0), epoch_of(&h)))
            },
        );
        assert!(
            changed_at <= switched_at + 2,
            "new epoch {new_epoch} at interval {changed_at}, the hot keys changed during interval {}",
            switched_at + 1
        );
        // The epoch that follows the drift may be fitted to a window still holding the old hot
        // keys' records (it was published at most two intervals after the change); the new hottest
        // key is pinned by it or by one of the next few.
        let hottest = zipf_key(1, 1).into_bytes();
        let pinned_in = wait_for(
            "the new hottest key pinned",
            Duration::from_secs(15),
            || {
                let a = sampler.assignment()?;
                (a.epoch() >= new_epoch && a.heavy().iter().any(|h| h.key == hottest))
                    .then(|| a.epoch())
            },
        );
        assert!(
            pinned_in <= new_epoch + 3,
            "the new hottest key pinned only in epoch {pinned_in} (first after the drift: {new_epoch}): {}",
            sampler.log()
        );
        let moved = sampler
            .metric("dkg_sampler_moved_load_share_ratio", &[("topic", &topic)])
            .expect("moved share");
        assert!((0.0..=1.0).contains(&moved), "moved share {moved}");
    });

    let published = epochs(&read_control_topic(&topic, true));
    assert_strictly_increasing(&published);
    assert!(published.len() >= 2, "{published:?}");
    drop(sampler);
    workload.stop().await;
}
