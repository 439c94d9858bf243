//! Epochs strictly increase across restarts on the real broker: each start reads the control topic (after
//! taking the transactional id) and continues from the highest epoch there, whoever published it.
//!
//! With `--control-format v2` (`docs/spec.md` 6.4, issue 13) also after a retraction and after
//! compaction (the retraction document keeps the epoch floor), and a deleted-and-recreated control
//! topic gets a new generation that a running producer and a fresh one both follow. Each v2 test
//! has its own control topic: a generation record on the shared default one would reset every other
//! test's producers.

mod common;

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use dkg_kafka::Assignment;
use dkg_kafka::DkgProducer;
use dkg_kafka::kafka::control::{
    ControlTopicReader, ensure_control_topic, publish_value, publisher_config,
};
use dkg_kafka_core::assignment::{ControlDocument, GENERATION_KEY};
use dkg_testkit::fixtures::assignment;
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::FutureProducer;

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
        keys: 1_000,
        ..WorkloadSpec::zipf(&topic, 5)
    })
    .await;

    tokio::task::block_in_place(|| {
        let once = || Sampler::run_once("once", &topic);
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

/// One record of a v2 test's control topic: key and decoded value (None = tombstone).
type Logged = (String, Option<ControlDocument>);

/// Every committed record of `control`, decoded (panics on a value no reader would accept).
fn control_log(control: &str) -> Vec<Logged> {
    read_keyed(control, true, |_| true)
        .into_iter()
        .map(|(_, k, v)| {
            let doc = v.map(|v| ControlDocument::from_json(&v).expect("a valid control record"));
            (String::from_utf8(k).expect("UTF-8 key"), doc)
        })
        .collect()
}

/// The generation ids of the `@generation` records, in log order.
fn generations(log: &[Logged]) -> Vec<String> {
    log.iter()
        .filter_map(|(k, d)| match d {
            Some(ControlDocument::Generation(g)) if k == GENERATION_KEY => Some(g.clone()),
            _ => None,
        })
        .collect()
}

/// `topic`'s records as (kind, epoch, generation): `a` assignment, `r` retraction.
fn topic_docs(log: &[Logged], topic: &str) -> Vec<(char, u64, Option<String>)> {
    log.iter()
        .filter(|(k, _)| k == topic)
        .map(|(_, d)| match d {
            Some(ControlDocument::Assignment(a)) => {
                assert_eq!(a.format_version(), 2, "a v2 publisher writes version 2");
                ('a', a.epoch(), a.generation().map(str::to_owned))
            }
            Some(ControlDocument::Retraction(r)) => ('r', r.epoch, r.generation.clone()),
            other => panic!("unexpected record for {topic}: {other:?}"),
        })
        .collect()
}

/// `dkg-sampler run --once` with `--control-format v2` on `control`; exits 0.
fn once_v2(topic: &str, control: &str) {
    let flags = [
        "--once",
        "--interval-secs",
        "1",
        "--control-topic",
        control,
        "--control-format",
        "v2",
    ];
    let mut s = Sampler::start("once-v2", topic, &flags);
    let status = s.wait_exit(Duration::from_secs(60));
    assert!(status.success(), "--once: {status}\n{}", s.log());
}

/// `dkg-sampler retract --control-format <format>` on `control`; exits 0, its stdout.
fn retract(topic: &str, control: &str, format: &str) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dkg-sampler"));
    cmd.args([
        "retract",
        "--bootstrap-servers",
        &bootstrap(),
        "--topic",
        topic,
    ])
    .args(["--control-topic", control, "--control-format", format])
    .env("DKG_LOG", "warn");
    dkg_testkit::process::run_ok(&mut cmd, "dkg-sampler retract")
}

fn client() -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap());
    c
}

/// A fresh reader's view of `control`: `topic`'s assignment (epoch, generation), if adopted.
async fn adopted(control: &str, topic: &str) -> Option<(u64, Option<String>)> {
    let mut reader = ControlTopicReader::new(&client(), control).expect("reader");
    reader
        .catch_up(Duration::from_secs(30), |_| {})
        .await
        .expect("read the control topic");
    let a = reader.book().get(topic)?;
    Some((a.epoch(), a.generation().map(str::to_owned)))
}

/// A v2 test's data topic (4 partitions) with a keyed stream through a plain producer, and the name
/// of its own control topic.
async fn v2_setup(name: &str, seed: u64) -> (String, String, Workload) {
    let topic = unique_topic(name);
    let control = unique_topic(&format!("{name}-control"));
    create_topic(&bootstrap(), &topic, 4, &[]).await;
    let workload = Workload::start(WorkloadSpec {
        keys: 1_000,
        dkg: false,
        ..WorkloadSpec::zipf(&topic, seed)
    })
    .await;
    (topic, control, workload)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_epochs_never_repeat_after_a_retraction_a_restart_or_compaction() {
    let (topic, control, workload) = v2_setup("sampler-v2-floor", 6).await;

    let (generation, kept) = tokio::task::block_in_place(|| {
        once_v2(&topic, &control);
        let log = control_log(&control);
        let gens = generations(&log);
        assert_eq!(
            gens.len(),
            1,
            "one generation record on a new control topic: {log:?}"
        );
        let g = Some(gens[0].clone());
        assert_eq!(
            log[0].0, GENERATION_KEY,
            "written before the first document"
        );
        assert_eq!(topic_docs(&log, &topic), [('a', 1, g.clone())]);

        let said = retract(&topic, &control, "v2");
        assert!(said.contains("at epoch 2"), "{said}");
        once_v2(&topic, &control);
        retract(&topic, &control, "v2");
        let log = control_log(&control);
        assert_eq!(generations(&log), gens, "the generation in force is kept");
        assert_eq!(
            topic_docs(&log, &topic),
            [
                ('a', 1, g.clone()),
                ('r', 2, g.clone()),
                ('a', 3, g.clone()),
                ('r', 4, g.clone())
            ],
            "a restart after a retraction continues above its floor"
        );
        // What compaction keeps: the last record of each key, in log order.
        let mut last: HashMap<&str, usize> = HashMap::new();
        for (i, (k, _)) in log.iter().enumerate() {
            last.insert(k, i);
        }
        let mut kept: Vec<usize> = last.into_values().collect();
        kept.sort_unstable();
        let raw = read_keyed(&control, true, |_| true);
        let kept: Vec<_> = kept.into_iter().map(|i| raw[i].clone()).collect();
        (gens[0].clone(), kept)
    });
    assert_eq!(
        adopted(&control, &topic).await,
        None,
        "retracted: producers use Kafka's placement"
    );

    // A compacted control topic: only the generation record and the last retraction remain.
    let compacted = unique_topic("sampler-v2-floor-compacted");
    let admin: AdminClient<DefaultClientContext> = client().create().expect("admin");
    ensure_control_topic(&admin, &compacted, 1)
        .await
        .expect("create");
    let producer: FutureProducer = publisher_config(&client()).create().expect("producer");
    assert_eq!(kept.len(), 2, "{kept:?}");
    for (_, key, value) in &kept {
        let key = std::str::from_utf8(key).expect("UTF-8 key");
        let value = value.as_deref().expect("no tombstone");
        publish_value(&producer, &compacted, key, value, Duration::from_secs(10))
            .await
            .expect("copy");
    }
    tokio::task::block_in_place(|| {
        once_v2(&topic, &compacted);
        let log = control_log(&compacted);
        assert_eq!(
            generations(&log),
            std::slice::from_ref(&generation),
            "no new generation"
        );
        let g = Some(generation.clone());
        assert_eq!(
            topic_docs(&log, &topic),
            [('r', 4, g.clone()), ('a', 5, g.clone())],
            "the floor survives compaction and the restart"
        );
    });
    assert_eq!(
        adopted(&compacted, &topic).await,
        Some((5, Some(generation))),
        "a fresh producer adopts it (not stale)"
    );
    // The default format retracts with a tombstone (and so clears the floor, spec 6.3).
    let said = tokio::task::block_in_place(|| retract(&topic, &compacted, "v1"));
    assert!(said.contains("tombstone"), "{said}");
    let last = tokio::task::block_in_place(|| control_log(&compacted).pop());
    assert_eq!(last, Some((topic.clone(), None)), "a tombstone last");
    assert_eq!(adopted(&compacted, &topic).await, None);
    workload.stop().await;
}

/// Where `producer` places each of `keys` (partition, epoch).
fn placements(
    producer: &DkgProducer,
    topic: &str,
    keys: &[String],
) -> Vec<(Option<i32>, Option<u64>)> {
    keys.iter()
        .map(|k| {
            let r = producer.router().route(topic, k.as_bytes());
            (r.partition, r.epoch)
        })
        .collect()
}

async fn dkg_producer(topic: &str, control: &str) -> DkgProducer {
    DkgProducer::builder(client())
        .control_topic(control)
        .topics([topic])
        .build()
        .await
        .expect("DkgProducer")
}

/// Delete `control` and create it again, empty; returns when the new topic has a leader.
async fn recreate(control: &str) -> Instant {
    let admin: AdminClient<DefaultClientContext> = client().create().expect("admin");
    admin
        .delete_topics(&[control], &AdminOptions::new())
        .await
        .expect("delete");
    tokio::task::block_in_place(|| {
        wait_for("the deletion", Duration::from_secs(30), || {
            (!topic_exists(control)).then_some(())
        });
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Err(e) = ensure_control_topic(&admin, control, 1).await {
        assert!(Instant::now() < deadline, "recreating {control}: {e}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let recreated = Instant::now();
    tokio::task::block_in_place(|| {
        wait_for(
            "the recreated topic's leader",
            Duration::from_secs(30),
            || topic_exists(control).then_some(()),
        );
    });
    recreated
}

/// Wait until `control` holds a generation record in force (the last one) and, after it, a
/// document of `topic` naming it: (generation, epoch of that document). After a recreation under a
/// running sampler, the new log may begin with a document of the old generation, written by a
/// publish racing the deletion before the sampler could see it: readers reject that one
/// (`generation_mismatch`) until the new generation's document follows.
fn first_document(control: &str, topic: &str) -> (String, u64) {
    wait_for(
        "a generation and a document",
        Duration::from_secs(60),
        || {
            // The sampler creates the control topic at its start.
            if !topic_exists(control) {
                return None;
            }
            let log = control_log(control);
            let g = generations(&log).pop()?;
            let after = log
                .iter()
                .rposition(|(k, _)| k == GENERATION_KEY)
                .map_or(0, |i| i + 1);
            topic_docs(&log[after..], topic)
                .into_iter()
                .find(|(_, _, dg)| dg.as_ref() == Some(&g))
                .map(|(_, epoch, _)| (g, epoch))
        },
    )
}

/// A producer started now follows an assignment of `generation`, and `running` comes to place every
/// key as it does: it adopts the same document (generation and epoch), and then routes alike.
///
/// Event-based: the wait ends when `running` has adopted the fresh producer's document, and its
/// bound (60 s) only a producer that never follows reaches. How soon it follows (one metadata
/// refresh, 5 s, issue 13's target) is the machine's pace and is printed, not asserted: on a loaded
/// 2-core machine the refresh task can be starved past any small bound.
async fn producers_agree(running: &DkgProducer, topic: &str, control: &str, generation: &str) {
    let keys: Vec<String> = (1..=1_000).map(|r| zipf_key(0, r)).collect();
    let fresh = dkg_producer(topic, control).await;
    let adopted = fresh
        .router()
        .assignment(topic)
        .expect("the fresh producer adopted one");
    assert_eq!(adopted.generation(), Some(generation));
    let started = Instant::now();
    tokio::task::block_in_place(|| {
        wait_for(
            "the running producer to adopt the fresh one's document",
            Duration::from_secs(60),
            || {
                // Both read live (the sampler may publish again). The document each router holds is
                // read before and after the placements: when all four are one document (routers never
                // go back to an older one), both placed every key by it, so the partitions must agree.
                let document = |p: &DkgProducer| {
                    p.router()
                        .assignment(topic)
                        .map(|a| (a.epoch(), a.generation().map(str::to_owned)))
                };
                let before = (document(running), document(&fresh));
                let expected = placements(&fresh, topic, &keys);
                assert!(
                    expected.iter().all(|(_, e)| e.is_some()),
                    "routed by an assignment"
                );
                let now = placements(running, topic, &keys);
                let after = (document(running), document(&fresh));
                let one = before.0.is_some()
                    && before.0 == before.1
                    && before == after
                    && now
                        .iter()
                        .chain(&expected)
                        .all(|(_, e)| *e == before.0.as_ref().map(|d| d.0));
                if !one {
                    return None;
                }
                assert_eq!(now, expected, "one document, one placement");
                Some(())
            },
        )
    });
    eprintln!(
        "the running producer agreed {:.2} s after the fresh one started",
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_a_recreated_control_topic_gets_a_generation_every_producer_follows() {
    let (topic, control, workload) = v2_setup("sampler-v2-recreate", 7).await;
    let flags = [
        "--interval-secs",
        "1",
        "--control-topic",
        &control,
        "--control-format",
        "v2",
    ];
    let mut sampler = Sampler::start("v2-recreate", &topic, &flags);
    let first = tokio::task::block_in_place(|| first_document(&control, &topic));
    let running = dkg_producer(&topic, &control).await;
    producers_agree(&running, &topic, &control, &first.0).await;

    // 1. Recreated under the running sampler: it notices (the topic ends before what it read),
    //    writes a new generation and publishes under it.
    let recreated = recreate(&control).await;
    let second = tokio::task::block_in_place(|| first_document(&control, &topic));
    assert_ne!(
        second.0, first.0,
        "a recreated control topic gets a new generation"
    );
    eprintln!(
        "republished under a new generation {:.1} s after the recreation, epoch {} (was {})",
        recreated.elapsed().as_secs_f64(),
        second.1,
        first.1
    );
    producers_agree(&running, &topic, &control, &second.0).await;

    // 2. Recreated while no sampler runs, then a new sampler: its epochs start again at 1, below
    //    the running producer's. Only the new generation makes that producer take them.
    //    (A crash, and `--once` in a group of its own: no wait for the old member's session.)
    tokio::task::block_in_place(|| sampler.kill());
    recreate(&control).await;
    tokio::task::block_in_place(|| once_v2(&topic, &control));
    let third = tokio::task::block_in_place(|| first_document(&control, &topic));
    assert_ne!(third.0, second.0, "a new generation again");
    assert!(
        third.1 <= second.1,
        "epochs repeat on the new topic: {third:?} after {second:?}"
    );
    producers_agree(&running, &topic, &control, &third.0).await;
    workload.stop().await;
}
