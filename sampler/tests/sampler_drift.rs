//! Drift and hysteresis on the real broker: the first epoch waits until the window supports its
//! prediction (2 points of sampling noise: about 71,000 sampled records over 6 partitions) and says so
//! in /healthz; with a stable key distribution the sampler publishes no new epoch over ten intervals
//! that read 200,000 records; when the hot keys change, a new epoch follows, and it or one of the next
//! three pins the new hottest key.
//!
//! Every check is anchored on data, not on the machine's pace: the topic holds exactly 30,000 records
//! (too few for the first epoch) until /healthz has said that the first epoch waits; the publish itself
//! names the window's noise; the stable stretch counts decisions and the records they saw; the drift
//! checks wait for the events (a new epoch, the hottest key pinned) with bounds (60 s) only a sampler
//! that never follows reaches. "Within two intervals" of the drift was a per-interval pace: an interval
//! of a starved sampler holds a lump of several seconds' records, or none.

mod common;

use std::time::Duration;

use common::*;

const PARTITIONS: u32 = 6;
/// What the topic holds while /healthz must show the first epoch waiting: above --min-samples
/// (1,000), well below the ~71,000 sampled records that 2% of noise needs.
const HELD: u64 = 30_000;
/// Records the sampler reads over the stable stretch (ten 1 s intervals at the workload's rate).
const STABLE_RECORDS: f64 = 200_000.0;

fn epoch_of(h: &serde_json::Value) -> u64 {
    h["epoch"].as_u64().unwrap_or(0)
}

/// The noise (percent) the publish log line of the first epoch names: "... sampling noise is 1.9%".
fn first_publish_noise(log: &str) -> Option<f64> {
    let line = log
        .lines()
        .find(|l| l.contains("no assignment published yet; the window's sampling noise is"))?;
    let (_, rest) = line.split_once("sampling noise is ")?;
    rest.split('%').next()?.trim().parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampler_follows_drift_and_holds_still_on_a_stable_distribution() {
    let topic = unique_topic("sampler-drift");
    create_topic(&bootstrap(), &topic, PARTITIONS, &[]).await;
    let workload = Workload::start_held(
        WorkloadSpec {
            records_per_second: 20_000,
            ..WorkloadSpec::zipf(&topic, 7)
        },
        HELD,
    )
    .await;
    // From the earliest offset: the sampler reads all the held records, however late it joins.
    let sampler = Sampler::start(
        "drift",
        &topic,
        &[
            "--interval-secs",
            "1",
            "--first-epoch-noise",
            "0.02",
            "--auto-offset-reset",
            "earliest",
        ],
    );
    let consumed = |s: &Sampler| {
        s.metric("dkg_sampler_records_consumed_total", &[("topic", &topic)])
            .unwrap_or(0.0)
    };

    tokio::task::block_in_place(|| {
        // The first epoch waits: with HELD records on the topic the window cannot support it, and
        // /healthz says so (the bound: a sampler that never reads them).
        wait_for(
            "/healthz to show that the first epoch waits",
            Duration::from_secs(60),
            || {
                let h = sampler.health()?;
                assert_eq!(epoch_of(&h), 0, "published on {HELD} records: {h}");
                h["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("first epoch waits"))
                    .then_some(())
            },
        );
        workload.release();
        let (first_n, first_epoch) =
            wait_for("the first assignment", Duration::from_secs(60), || {
                let h = sampler.health()?;
                (epoch_of(&h) >= 1).then(|| (h["intervals"].as_u64().unwrap_or(0), epoch_of(&h)))
            });
        // ... and publishes once the window supports the prediction, as its publish line says.
        let noise = first_publish_noise(&sampler.log());
        assert!(
            noise.is_some_and(|n| n <= 2.0),
            "the first epoch's window noise {noise:?}% (at most 2%): {}",
            sampler.log()
        );
        // Stable distribution: ten decisions, on at least STABLE_RECORDS records, no new epoch. The
        // records gate makes the stretch about the stream, not about how many ticks a busy machine
        // fits in; the bound is for a sampler that stops. (Not the test's to fix: a sampler that
        // falls behind fetches its partitions unevenly, and its window then predicts 14-40% for the
        // assignment in force on this stable stream, seen at load 25 on 2 cores: a fix of the
        // sampler's window, not of this scenario.)
        let stable_from = consumed(&sampler);
        let last = wait_for("ten stable intervals", Duration::from_secs(120), || {
            let h = sampler.health()?;
            assert_eq!(
                epoch_of(&h),
                first_epoch,
                "a new epoch on a stable distribution (interval {}): {h}",
                h["intervals"]
            );
            (h["intervals"].as_u64()? >= first_n + 10
                && consumed(&sampler) >= stable_from + STABLE_RECORDS)
                .then_some(h)
        });
        assert_eq!(epoch_of(&last), first_epoch);
        let published = sampler
            .metric("dkg_sampler_publishes_total", &[("topic", &topic)])
            .unwrap_or(-1.0);
        assert_eq!(published, 1.0, "one publish while stable");

        // Drift: other keys become hot. The sampler follows: a new epoch (the bound: one that
        // never does).
        workload.set_generation(1);
        let new_epoch = wait_for(
            "a new epoch after the drift",
            Duration::from_secs(60),
            || {
                let h = sampler.health()?;
                (epoch_of(&h) > first_epoch).then(|| epoch_of(&h))
            },
        );
        // The epoch that follows the drift may be fitted to a window still holding the old hot
        // keys' records; the new hottest key is pinned by it or by one of the next few (a count of
        // decisions, each of which must beat the one in force by the improvement margin).
        let hottest = zipf_key(1, 1).into_bytes();
        let pinned_in = wait_for(
            "the new hottest key pinned",
            Duration::from_secs(60),
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
        for line in sampler.log().lines() {
            if line.contains("published a new assignment") {
                eprintln!("{line}");
            }
        }
        let moved = sampler
            .metric("dkg_sampler_moved_load_share_ratio", &[("topic", &topic)])
            .expect("moved share");
        assert!((0.0..=1.0).contains(&moved), "moved share {moved}");

        // The misplacement detector (issue 31 item 5) allows for each new epoch's adoption lag:
        // the wrapped producer's records are not misplaced across the drift's epochs (counted
        // until two intervals after the last publish seen above).
        let until = sampler.intervals() + 2;
        wait_for("two more intervals", Duration::from_secs(30), || {
            (sampler.intervals() >= until).then_some(())
        });
        let label = [("topic", topic.as_str())];
        let counter = |name| sampler.metric(name, &label).unwrap_or(0.0);
        let checked = counter("dkg_sampler_placement_checked_records_total");
        let misplaced = counter("dkg_sampler_misplaced_records_total");
        eprintln!("misplaced: {misplaced} of {checked} checked");
        assert!(
            checked > STABLE_RECORDS && misplaced / checked < 0.005,
            "misplaced {misplaced} of {checked} checked: {}",
            sampler.log()
        );
    });

    let published = epochs(&read_control_topic(&topic, true));
    assert_strictly_increasing(&published);
    assert!(published.len() >= 2, "{published:?}");
    drop(sampler);
    workload.stop().await;
}
