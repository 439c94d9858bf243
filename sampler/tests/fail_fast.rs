//! Fail fast where a person waits, keep trying where a sidecar serves (issue 31, finding 4).
//!
//! On main `run --once` against an unreachable broker retried for ever, `inspect` of a misspelt
//! control topic said "0 control records read", and an idle sidecar logged nothing about why it
//! never published. Now the one-shot commands exit non-zero within their start-up timeout with one
//! `error:` line naming the broker and the cause; the sidecar keeps retrying, not ready on
//! `/healthz`, saying why; `inspect` names a missing control topic; an idle sidecar says once per
//! interval why it publishes nothing.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use dkg_testkit::process::LoggedChild;

const UNREACHABLE: &str = "127.0.0.1:1";
/// The start-up timeout the one-shot commands get here (`--startup-timeout-secs`, `--timeout-secs`).
const TIMEOUT_SECS: u64 = 3;
/// What the exit may take beyond it (a metadata request in flight is not cancelled).
const SLACK: Duration = Duration::from_secs(12);

fn one_shot(name: &str, args: &[&str]) -> (bool, Duration, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dkg-sampler"));
    c.args(args)
        .env("DKG_STARTUP_TIMEOUT_SECS", TIMEOUT_SECS.to_string())
        .env("DKG_INSPECT_TIMEOUT_SECS", TIMEOUT_SECS.to_string())
        .env("DKG_RETRACT_TIMEOUT_SECS", TIMEOUT_SECS.to_string())
        .env("DKG_LOG", "warn");
    let log = std::env::temp_dir().join(format!("{}-{name}.log", unique_topic("dkg-fail-fast")));
    let started = Instant::now();
    let mut child = LoggedChild::spawn(name, c, log);
    let status = child.wait_exit(Duration::from_secs(TIMEOUT_SECS) + SLACK);
    (status.success(), started.elapsed(), child.log())
}

fn error_lines(log: &str) -> Vec<&str> {
    log.lines().filter(|l| l.starts_with("error:")).collect()
}

#[test]
fn one_shot_commands_give_up_on_an_unreachable_broker_naming_it() {
    let cases: [(&str, Vec<&str>); 3] = [
        (
            "once",
            vec![
                "run",
                "--once",
                "--topic",
                "t",
                "--metrics-addr",
                "127.0.0.1:0",
            ],
        ),
        ("inspect", vec!["inspect", "--topic", "t"]),
        ("retract", vec!["retract", "--topic", "t"]),
    ];
    for (name, mut args) in cases {
        args.extend(["--bootstrap-servers", UNREACHABLE]);
        let (ok, took, log) = one_shot(name, &args);
        assert!(!ok, "{name} must fail:\n{log}");
        let errors = error_lines(&log);
        assert_eq!(errors.len(), 1, "{name}: one error line:\n{log}");
        assert!(
            errors[0].contains(UNREACHABLE),
            "{name}: the line names the broker: {}",
            errors[0]
        );
        assert!(
            errors[0].contains("reach") || errors[0].contains("gave up"),
            "{name}: and the cause: {}",
            errors[0]
        );
        eprintln!("{name}: exited after {took:?}: {}", errors[0]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_names_a_control_topic_that_does_not_exist() {
    let missing = unique_topic("no-such-control-topic");
    let (ok, _, log) = tokio::task::block_in_place(|| {
        one_shot(
            "inspect-missing",
            &[
                "inspect",
                "--topic",
                "t",
                "--control-topic",
                &missing,
                "--bootstrap-servers",
                &bootstrap(),
            ],
        )
    });
    assert!(!ok, "{log}");
    let errors = error_lines(&log);
    assert_eq!(errors.len(), 1, "{log}");
    assert!(
        errors[0].contains(&missing) && errors[0].contains("does not exist"),
        "{}",
        errors[0]
    );
    assert!(!topic_exists(&missing), "inspect never creates it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sidecar_keeps_retrying_and_says_why_it_is_not_ready() {
    let s = Sampler::start_on(
        UNREACHABLE,
        "unreachable",
        "t",
        &["--interval-secs", "1"],
        &[],
    );
    tokio::task::block_in_place(|| {
        let h = wait_for("/healthz to say why", Duration::from_secs(30), || {
            s.health().filter(|h| h["message"].is_string())
        });
        let (code, _) = s.get("/healthz").expect("healthz");
        assert_eq!(code, 503, "{h}");
        assert_eq!(h["state"], "waiting", "{h}");
        let message = h["message"].as_str().unwrap_or_default();
        assert!(message.contains(UNREACHABLE), "{h}");
    });

    // An idle topic: the sidecar says every interval why it publishes nothing.
    let topic = unique_topic("sampler-idle");
    create_topic(&bootstrap(), &topic, 2, &[]).await;
    let idle = Sampler::start("idle", &topic, &["--interval-secs", "1"]);
    tokio::task::block_in_place(|| {
        wait_for("three idle intervals", Duration::from_secs(60), || {
            (idle
                .log()
                .matches("no keyed records in the interval")
                .count()
                >= 3)
                .then_some(())
        });
        let h = idle.health().expect("health");
        assert!(
            h["message"]
                .as_str()
                .is_some_and(|m| m.contains("no keyed records")),
            "{h}"
        );
    });
}
