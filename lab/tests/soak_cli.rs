//! `dkg-lab soak` on the real broker, shortened to 12 s (2 producers x 300 records/s, hot keys
//! drifting every 4 s, decisions every 2 s; about 25 s with start and check): the sampler, the
//! producers and the consumer group run as processes, and the check afterwards finds every record
//! exactly once on the partition its epoch names. A missing broker fails the test
//! (`dkg_testkit::broker::bootstrap`).

mod common;

use common::{count, lab, read_json, run_ok};

const SECS: u64 = 12;
const RATE: u64 = 300;
const PRODUCERS: u64 = 2;

#[test]
fn a_short_soak_loses_duplicates_and_misplaces_nothing() {
    let (mut cmd, out) = lab("soak", "soak");
    cmd.args(["--duration-secs", &SECS.to_string()])
        .args(["--producers", &PRODUCERS.to_string()])
        .args(["--rate-per-producer", &RATE.to_string()])
        .args(["--partitions", "6", "--keys", "2000"])
        .args(["--drift-secs", "4", "--interval-secs", "2"])
        .args([
            "--members",
            "2",
            "--warmup-secs",
            "2",
            "--drain-timeout-secs",
            "60",
        ])
        // The sidecar under soak is the product binary, which cargo builds for the lab's tests only
        // when asked to.
        .env(
            "DKG_SAMPLER_BIN",
            dkg_testkit::process::workspace_bin("dkg-sampler"),
        );
    run_ok(&mut cmd, "dkg-lab soak");
    let r = read_json(&out.join("soak.json"));
    let v = &r["verdict"];
    let expected = SECS * RATE * PRODUCERS;
    assert_eq!(count(v, "expected"), expected, "{v}");
    assert_eq!(count(v, "read"), expected, "{v}");
    for bad in [
        "lost",
        "duplicated",
        "misplaced",
        "unknown_epoch",
        "foreign",
    ] {
        assert_eq!(count(v, bad), 0, "{bad}: {v}");
    }
    // The sampler published, and the producers followed: records placed by an assignment exist.
    assert!(count(&r, "epochs_published") >= 1, "{r}");
    let by_assignment: u64 = v["per_epoch"]
        .as_object()
        .expect("per_epoch")
        .iter()
        .filter(|(epoch, _)| epoch.as_str() != "0")
        .map(|(_, c)| c.as_u64().unwrap_or(0))
        .sum();
    assert!(by_assignment > 0, "no record placed by an assignment: {v}");
    assert_eq!(
        r["consumed"].as_u64(),
        Some(expected),
        "the group processed everything once"
    );
    let memory = r["memory"].as_array().expect("memory rows");
    let names: Vec<&str> = memory
        .iter()
        .filter_map(|m| m["process"].as_str())
        .collect();
    assert_eq!(names, ["sampler", "consume", "producer0", "producer1"]);
    for m in memory {
        let rss = m["end_rss_mib"].as_f64().unwrap_or(0.0);
        assert!(rss > 1.0, "no memory sample: {m}");
    }
}
