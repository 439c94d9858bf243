//! Split keys the standard way: partial aggregates per partition, merged downstream into a
//! compacted topic keyed by key (the pipeline is in `pattern.rs`).
//!
//! A key too heavy for one partition is split over several (`docs/spec.md` 4.6): its records
//! are spread over its parts, no single consumer sees all of them, and their order across the
//! parts is not kept (`DkgMessage::split_parts` marks them). So every member counts per
//! (partition, key), emits the partial counts as deltas to a `partials` topic when a partition
//! leaves it and at the end, and a merger sums them per key into a compacted `totals` topic.
//!
//! The run takes `hot` from whole (epoch 1) to split over three partitions (epoch 2) to whole
//! again (epoch 3), then compares every key's merged total with what was produced.
//!
//! ```text
//! scripts/kafka start
//! cargo run -p dkg-kafka --example split_aggregates -- [records per epoch] [bootstrap]
//! ```

mod pattern;

use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let mut args = std::env::args().skip(1);
    let per_phase: u64 = args.next().map_or(Ok(3_000), |a| a.parse())?;
    let bootstrap = args.next().unwrap_or_else(|| "127.0.0.1:9092".to_owned());
    let out = pattern::run(&bootstrap, per_phase, Duration::ZERO).await;

    let split = out.seen.iter().filter(|s| s.split.is_some()).count();
    let wrong: Vec<_> = out
        .produced
        .iter()
        .filter(|(k, n)| out.totals.get(*k) != Some(n))
        .collect();
    println!(
        "{} records of {} keys through 3 epochs ({split} of them split); {} keys merged wrong",
        out.sent.len(),
        out.produced.len(),
        wrong.len()
    );
    for (k, n) in wrong.iter().take(10) {
        println!(
            "  {}: produced {n}, merged {:?}",
            String::from_utf8_lossy(k),
            out.totals.get(*k)
        );
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err("merged totals differ from the produced counts".into())
    }
}
