//! Operating `dkg-sampler run` on the real broker: a missing topic or an unreachable broker is reported
//! clearly and retried with backoff (never a crash), SIGTERM while waiting exits cleanly, `--once` on an idle
//! topic fails with a clear message, environment variables configure every flag, and bad flags are rejected.

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_topic_is_reported_and_awaited_then_used() {
    let topic = unique_topic("sampler-missing");
    let s = Sampler::start(
        "missing",
        &topic,
        &["--interval-secs", "1", "--max-backoff-secs", "1"],
    );
    tokio::task::block_in_place(|| {
        wait_for("the missing-topic message", Duration::from_secs(20), || {
            s.log()
                .contains(&format!("topic {topic:?} does not exist"))
                .then_some(())
        });
        let (code, body) = s.get("/healthz").expect("healthz served while waiting");
        assert_eq!(code, 503, "{body}");
        assert!(body.contains("\"state\":\"waiting\""), "{body}");
        assert!(s.log().contains("retrying in"), "it retries with backoff");
    });
    create_topic(&bootstrap(), &topic, 3, &[]).await;
    tokio::task::block_in_place(|| {
        wait_for(
            "the sampler to run once the topic exists",
            Duration::from_secs(30),
            || {
                let (code, body) = s.get("/healthz")?;
                (code == 200
                    && body.contains("\"state\":\"running\"")
                    && body.contains("\"partitions\":3"))
                .then_some(())
            },
        );
    });
}

#[test]
fn an_unreachable_broker_is_retried_and_sigterm_still_exits_cleanly() {
    // Nothing listens on port 1; also configure through the environment instead of flags.
    let addr = free_addr();
    let log = std::env::temp_dir().join(format!("{}.log", unique_topic("sampler-unreachable")));
    let file = std::fs::File::create(&log).expect("log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_dkg-sampler"))
        .arg("run")
        .env("DKG_BOOTSTRAP_SERVERS", "127.0.0.1:1")
        .env("DKG_TOPIC", "nowhere")
        .env("DKG_METRICS_ADDR", addr.to_string())
        .env("DKG_MAX_BACKOFF_SECS", "2")
        .env(
            "DKG_KAFKA_CONFIG",
            "socket.connection.setup.timeout.ms=1000\nlog_level=2",
        )
        .stdout(file.try_clone().expect("fd"))
        .stderr(file)
        .spawn()
        .expect("spawn");
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    wait_for(
        "the unreachable-broker message",
        Duration::from_secs(30),
        || {
            text()
                .contains("cannot reach the Kafka broker at 127.0.0.1:1")
                .then_some(())
        },
    );
    let (code, _) = wait_for("healthz", Duration::from_secs(5), || {
        http_get(addr, "/healthz").ok()
    });
    assert_eq!(code, 503);
    assert!(
        child.try_wait().expect("wait").is_none(),
        "still running, not crashed:\n{}",
        text()
    );
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = wait_for("exit after SIGTERM", Duration::from_secs(15), || {
        child.try_wait().expect("wait")
    });
    assert!(status.success(), "{status}:\n{}", text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_on_an_idle_topic_fails_clearly_and_publishes_nothing() {
    let topic = unique_topic("sampler-idle");
    create_topic(&bootstrap(), &topic, 2, &[]).await;
    tokio::task::block_in_place(|| {
        let mut s = Sampler::start("idle", &topic, &["--once", "--interval-secs", "1"]);
        let status = s.wait_exit(Duration::from_secs(60));
        assert!(!status.success(), "--once without data must fail");
        assert!(s.log().contains("--once: no keyed records"), "{}", s.log());
        assert!(read_control_topic(&topic, false).is_empty());
    });
}

#[test]
fn invalid_flags_are_rejected_with_the_flag_named() {
    let cases: &[(&[&str], &str)] = &[
        (&["--sample-ratio", "0"], "--sample-ratio"),
        (
            &["--read-fraction", "0"],
            "invalid --read-fraction: 0 is outside (0, 1]",
        ),
        (
            &["--read-fraction", "1.5"],
            "invalid --read-fraction: 1.5 is outside (0, 1]",
        ),
        (
            &["--read-fraction", "NaN"],
            "invalid --read-fraction: NaN is outside (0, 1]",
        ),
        (&["--read-chunk", "0"], "--read-chunk"),
        (&["--decay", "1"], "--decay"),
        (&["--interval-secs", "0"], "--interval-secs"),
        (&["--top-n", "21"], "--top-n"),
        (&["--once", "--dry-run"], "--once"),
        (&["--kafka-config", "novalue"], "--kafka-config"),
        (&["--theta", "2"], "theta"),
    ];
    for (extra, flag) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_dkg-sampler"))
            .args([
                "run",
                "--bootstrap-servers",
                "127.0.0.1:1",
                "--topic",
                "t",
                "--metrics-addr",
                "127.0.0.1:0",
            ])
            .args(*extra)
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?} accepted");
        assert!(
            stderr.contains(flag),
            "{extra:?}: error does not name {flag}: {stderr}"
        );
    }
    let help = Command::new(env!("CARGO_BIN_EXE_dkg-sampler"))
        .args(["run", "--help"])
        .output()
        .expect("help");
    let help = String::from_utf8_lossy(&help.stdout);
    for needle in [
        "--interval-secs",
        "DKG_INTERVAL_SECS",
        "--dry-run",
        "--sample-ratio",
        "--imbalance-threshold",
    ] {
        assert!(help.contains(needle), "--help lacks {needle}");
    }
}
