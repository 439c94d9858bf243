//! `--read-fraction` on the real broker: on a pre-filled skewed backlog, a sampler reading a tenth of each
//! partition decides like one reading everything (same hottest keys, predicted imbalance within a stated
//! tolerance), counts what it skipped, and resumes after a restart from its committed offsets without
//! reading the backlog again. (A bad fraction's message: `sampler_operations.rs`.)

mod common;

#[path = "../benches/common/mod.rs"]
mod bench_common;

use std::time::Duration;

use common::*;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

const PARTITIONS: u32 = 6;
const BACKLOG: u64 = 300_000;
/// Offsets the sampler at F = 0.1 goes through before its counts are judged: 10 chunks of 5,000
/// offsets per partition, a fifth of the backlog.
const MIN_ADVANCED: f64 = 60_000.0;

fn predicted(s: &Sampler, topic: &str, placement: &str) -> Option<f64> {
    s.metric(
        "dkg_sampler_predicted_imbalance_ratio",
        &[("topic", topic), ("placement", placement)],
    )
}

fn counter(s: &Sampler, name: &str, topic: &str) -> f64 {
    s.metric(name, &[("topic", topic)]).unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenth_of_the_log_decides_like_all_of_it_and_resumes_after_a_restart() {
    let topic = unique_topic("sampler-read-fraction");
    let bootstrap = bootstrap();
    tokio::task::block_in_place(|| {
        // Zipf 1.0 over 10^4 keys: the hottest key is about 10% of the records.
        bench_common::prefill(&bootstrap, &topic, PARTITIONS, BACKLOG, (10_000, 1.0, 5));
        let common = ["--auto-offset-reset", "earliest", "--interval-secs", "4"];
        let full = Sampler::start("full", &topic, &[&common[..], &["--dry-run"]].concat());
        let group = format!("{topic}.tenth");
        let tenth_args = [
            &common[..],
            &[
                "--read-fraction",
                "0.1",
                "--read-chunk",
                "500",
                "--group-id",
                &group,
            ],
        ]
        .concat();
        let mut tenth = Sampler::start("tenth", &topic, &tenth_args);
        // Bounds (60 s) only a sampler that never decides reaches: the waits end at the events.
        for s in [&full, &tenth] {
            wait_for("a decision on the backlog", Duration::from_secs(60), || {
                predicted(s, &topic, "fresh")
            });
        }
        // What it read and skipped in its intervals: at most the backlog (the records it went through
        // before its first interval began are not counted, as at F = 1), about a tenth of it read.
        // Judged once it went through MIN_ADVANCED offsets (many 500-record chunks per partition),
        // not at its first decision: how far a first interval gets depends on the machine's pace,
        // and a few chunks make a coarse ratio.
        let (read, skipped) = wait_for(
            "the tenth sampler to go through part of the backlog",
            Duration::from_secs(60),
            || {
                let read = counter(&tenth, "dkg_sampler_records_consumed_total", &topic);
                let skipped = counter(&tenth, "dkg_sampler_records_skipped_total", &topic);
                (read + skipped >= MIN_ADVANCED).then_some((read, skipped))
            },
        );
        let advanced = read + skipped;
        assert!(
            advanced <= BACKLOG as f64 && skipped > 0.0,
            "read {read} + skipped {skipped} vs backlog {BACKLOG}"
        );
        assert!(
            (0.05..=0.2).contains(&(read / advanced)),
            "read {read}, skipped {skipped}"
        );
        assert_eq!(
            counter(&full, "dkg_sampler_records_skipped_total", &topic),
            0.0,
            "F = 1 skips nothing"
        );

        let (full_fresh, tenth_fresh) = (
            predicted(&full, &topic, "fresh").expect("fresh"),
            predicted(&tenth, &topic, "fresh").expect("fresh"),
        );
        // The predicted imbalance of the assignment each would publish: within 3 points. (Not the hash
        // placement's: in a backlog the window holds the part of each partition the sampler went through
        // during its first interval, which at F = 0.1 is uneven; the bench compares whole backlogs.)
        assert!(
            (full_fresh - tenth_fresh).abs() <= 0.03,
            "fresh: {full_fresh} at F = 1 vs {tenth_fresh} at F = 0.1"
        );
        // The hottest key (Zipf ranks start at 1; about 10% of the records) is pinned either way, and the
        // heavy keys found differ by at most one (a key near the threshold).
        // The gauges are set when the interval decides; /assignment once the document is published
        // (a dry run: once it would be), which for the publisher waits on its transaction.
        let [fa, ta] = [&full, &tenth].map(|s| {
            wait_for("the assignment served", Duration::from_secs(60), || {
                s.assignment()
            })
        });
        let hottest = bench_common::key(1);
        for (a, label) in [(&fa, "F = 1"), (&ta, "F = 0.1")] {
            assert!(
                a.heavy().iter().any(|h| h.key == hottest),
                "the hottest key is not pinned at {label}: {:?}",
                a.heavy()
            );
        }
        assert!(
            fa.heavy().len().abs_diff(ta.heavy().len()) <= 1,
            "heavy keys: {:?} at F = 1, {:?} at F = 0.1",
            fa.heavy(),
            ta.heavy()
        );

        // Restart: the group's committed offsets are at the end of the backlog, nothing is read again.
        // The event first: the group's committed offsets (auto-committed every 5 s, at the end of
        // each chunk it went through) are at the backlog's end, but for the tail of a partition
        // shorter than a chunk: at most the 1,000 offsets the restart may go through again, however
        // long going through the backlog took.
        let ends = EndOffsets::new(&topic, PARTITIONS).read();
        let reader: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", &group)
            .create()
            .expect("offset reader");
        wait_for(
            "the tenth sampler's offsets committed at the end of the backlog",
            Duration::from_secs(60),
            || {
                let mut tpl = TopicPartitionList::new();
                for p in 0..PARTITIONS as i32 {
                    tpl.add_partition(&topic, p);
                }
                let committed = reader
                    .committed_offsets(tpl, Duration::from_secs(10))
                    .ok()?;
                let behind = (0..PARTITIONS as i32)
                    .map(|p| match committed.find_partition(&topic, p)?.offset() {
                        Offset::Offset(o) => Some(ends[p as usize] - o),
                        _ => None,
                    })
                    .sum::<Option<i64>>()?;
                (behind <= 1000).then_some(())
            },
        );
        assert!(
            tenth.terminate(Duration::from_secs(30)).success(),
            "{}",
            tenth.log()
        );
        let again = Sampler::start("tenth-again", &topic, &tenth_args);
        wait_for(
            "two intervals after the restart",
            Duration::from_secs(60),
            || (again.intervals() >= 2).then_some(()),
        );
        let reread = counter(&again, "dkg_sampler_records_consumed_total", &topic)
            + counter(&again, "dkg_sampler_records_skipped_total", &topic);
        assert!(
            reread <= 1000.0,
            "the restarted sampler advanced {reread} offsets again:\n{}",
            again.log()
        );
    });
}
