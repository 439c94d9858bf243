//! Epochs are bounded (issue 31, finding 1; `docs/spec.md` 4.4 step 11b, 6.2) on the real broker.
//!
//! A writer of the control topic publishes a well-formed document for the topic at epoch
//! 18446744073709551615 (and one at 2^53) whose table sends every bucket to partition 0. On main
//! producers adopted it and the sampler's next epoch wrapped to 0 (every later document stale, for
//! good, also after a sampler restart). Now every reader rejects it (`out_of_range`): a producer
//! keeps the sampler's placement, and the sampler keeps publishing epochs the producer adopts, also
//! after a restart. A valid record at exactly 2^53 - 1 exhausts the epochs: the sampler stops
//! publishing and says so (/healthz 503, a metric, one ERROR line naming the record's offset and the
//! recovery).

mod common;

use std::time::Duration;

use common::*;
use dkg_kafka::DkgRouter;
use dkg_kafka::kafka::control::{publish_value, publisher_config};
use dkg_kafka_core::assignment::{Assignment, AssignmentParts, MAX_EPOCH};
use rdkafka::ClientConfig;
use rdkafka::producer::FutureProducer;

/// Write `value` under the record key `topic` on the control topic with a plain producer (the
/// attacker: any principal with `Write` on the control topic). Returns the record's offset.
async fn write_raw(topic: &str, value: &[u8]) -> i64 {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap());
    let producer: FutureProducer = publisher_config(&c).create().expect("producer");
    let delivery = publish_value(
        &producer,
        CONTROL_TOPIC,
        topic,
        value,
        Duration::from_secs(10),
    )
    .await
    .expect("write the record");
    delivery.offset
}

/// `a` with every bucket on partition 0, at `epoch` (written as text: above 2^53 - 1 no
/// `Assignment` can hold it).
fn all_on_zero(a: &Assignment, epoch: u64) -> Vec<u8> {
    let mut parts = a.clone().into_parts();
    parts.table.iter_mut().for_each(|p| *p = 0);
    for h in &mut parts.heavy {
        h.partition = 0;
        h.split.clear();
    }
    let text = String::from_utf8(
        Assignment::new(AssignmentParts {
            epoch: MAX_EPOCH,
            ..parts
        })
        .expect("a valid document")
        .to_json(),
    )
    .expect("UTF-8");
    text.replacen(
        &format!("\"epoch\":{MAX_EPOCH}"),
        &format!("\"epoch\":{epoch}"),
        1,
    )
    .into_bytes()
}

fn router_epoch(router: &DkgRouter, topic: &str) -> u64 {
    router.assignment(topic).map_or(0, |a| a.epoch())
}

const SAMPLER_ARGS: [&str; 2] = ["--interval-secs", "1"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_range_epochs_are_ignored_by_producers_and_the_sampler_across_a_restart() {
    let (topic, workload) = topic_with_workload("sampler-epoch-bounds", 6, 31).await;
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap());
    let registry = prometheus::Registry::new();
    let router = DkgRouter::builder(config)
        .metrics(&registry)
        .build()
        .await
        .expect("router");
    let rejected_out_of_range = || {
        registry
            .gather()
            .iter()
            .filter(|f| f.name() == "dkg_producer_assignments_rejected_total")
            .flat_map(|f| f.get_metric().iter())
            .filter(|m| {
                m.get_label()
                    .iter()
                    .any(|l| l.name() == "reason" && l.value() == "out_of_range")
            })
            .map(|m| m.get_counter().get_value())
            .sum::<f64>()
    };

    let mut s = Sampler::start("bounds-1", &topic, &SAMPLER_ARGS);
    let first = tokio::task::block_in_place(|| s.wait_assignment(Duration::from_secs(60)));
    tokio::task::block_in_place(|| {
        wait_for("the producer to adopt it", Duration::from_secs(20), || {
            (router_epoch(&router, &topic) == first.epoch()).then_some(())
        });
    });

    // The forged documents: well formed, every bucket on partition 0, epochs out of range.
    write_raw(&topic, &all_on_zero(&first, u64::MAX)).await;
    write_raw(&topic, &all_on_zero(&first, MAX_EPOCH + 1)).await;
    tokio::task::block_in_place(|| {
        wait_for(
            "the producer to reject both as out_of_range",
            Duration::from_secs(20),
            || (rejected_out_of_range() >= 2.0).then_some(()),
        );
    });
    let held = router.assignment(&topic).expect("an assignment");
    let sampler_now = s.assignment().expect("the sampler's assignment");
    assert_eq!(
        *held, sampler_now,
        "the producer keeps the sampler's placement"
    );
    assert!(
        held.epoch() >= first.epoch() && held.epoch() < 1000,
        "{}",
        held.epoch()
    );

    // Drift: the sampler publishes the next epoch, above the last in-range one, and the producer
    // adopts it.
    workload.set_generation(1);
    let second = tokio::task::block_in_place(|| {
        wait_for("a second epoch", Duration::from_secs(60), || {
            s.assignment().filter(|a| a.epoch() > held.epoch())
        })
    });
    // The next epoch counts in-range records only: one above the sampler's own (not 0, not 2^53).
    assert!(second.epoch() < 1000, "{}", second.epoch());
    tokio::task::block_in_place(|| {
        wait_for("the producer to adopt it", Duration::from_secs(20), || {
            (router_epoch(&router, &topic) == second.epoch()).then_some(())
        });
    });

    // A restart reads the whole control topic again, the forged records included.
    s.terminate(Duration::from_secs(30));
    let s = Sampler::start("bounds-2", &topic, &SAMPLER_ARGS);
    workload.set_generation(2);
    let third = tokio::task::block_in_place(|| {
        wait_for(
            "an epoch after the restart",
            Duration::from_secs(90),
            || s.assignment().filter(|a| a.epoch() > second.epoch()),
        )
    });
    assert!(third.epoch() < 1000, "{}", third.epoch());
    tokio::task::block_in_place(|| {
        wait_for("the producer to adopt it", Duration::from_secs(20), || {
            (router_epoch(&router, &topic) == third.epoch()).then_some(())
        });
        let h = s.health().expect("health");
        assert_eq!(h["state"], "running", "{h}");
    });
    drop(s);
    workload.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_record_at_the_largest_epoch_stops_the_sampler_and_says_how_to_recover() {
    let (topic, workload) = topic_with_workload("sampler-epoch-exhausted", 4, 53).await;
    let s = Sampler::start("exhausted", &topic, &SAMPLER_ARGS);
    let first = tokio::task::block_in_place(|| s.wait_assignment(Duration::from_secs(60)));
    let publishes = || s.metric("dkg_sampler_publishes_total", &[("topic", &topic)]);
    let published = publishes();
    let offset = write_raw(&topic, &all_on_zero(&first, MAX_EPOCH)).await;

    tokio::task::block_in_place(|| {
        let h = wait_for("/healthz to report it", Duration::from_secs(30), || {
            s.health().filter(|h| h["state"] == "exhausted")
        });
        let (code, _) = s.get("/healthz").expect("healthz");
        assert_eq!(code, 503, "{h}");
        let message = h["message"].as_str().unwrap_or_default();
        assert!(message.contains("generation"), "names the recovery: {h}");
        assert_eq!(
            s.metric("dkg_sampler_epochs_exhausted", &[("topic", &topic)]),
            Some(1.0)
        );
        // Several intervals later: still one ERROR line, naming the record's offset.
        let intervals = s.intervals();
        wait_for("more intervals", Duration::from_secs(30), || {
            (s.intervals() >= intervals + 3).then_some(())
        });
        let log = s.log();
        let errors: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("ERROR") && l.contains("epochs exhausted"))
            .collect();
        assert_eq!(errors.len(), 1, "one ERROR line: {log}");
        assert!(
            errors[0].contains(&format!("offset {offset}")),
            "names the record's offset {offset}: {}",
            errors[0]
        );
        assert!(errors[0].contains("--control-format v2"), "{}", errors[0]);
        assert_eq!(
            publishes(),
            published,
            "nothing published after the largest epoch"
        );
    });
    drop(s);
    workload.stop().await;
}
