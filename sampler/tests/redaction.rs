//! Secrets never leave the process (issue 31, finding 3): a table of secret-bearing settings, known
//! to librdkafka, unknown to it (Java-style) and misspelt, given to every subcommand of dkg-sampler
//! and of dkg-lab (the lab's binary, which shares the sampler's flags and scrubbed log) that takes
//! Kafka settings; none of the values may appear in stdout or stderr, whatever the
//! subcommand does with them (librdkafka rejects the unknown ones with an error that echoes key and
//! value; the known ones go on to an unreachable broker). `simulate` takes no Kafka settings.
//!
//! No broker: the bootstrap address is unreachable on purpose (`127.0.0.1:1`).

use std::process::Command;
use std::time::{Duration, Instant};

use dkg_testkit::process::LoggedChild;

/// Every value contains this marker, so one search finds any of them in the output.
const MARKER: &str = "hunter";

/// Accepted by librdkafka: the process goes on to the (unreachable) broker.
const KNOWN: [(&str, &str); 5] = [
    ("sasl.password", "Qa1hunterA"),
    ("ssl.key.password", "Qa2hunterB"),
    ("ssl.keystore.password", "Qa3hunterC"),
    ("sasl.oauthbearer.client.secret", "Qa4hunterD"),
    ("sasl.oauthbearer.config", "principal=Qa5hunterE"),
];

/// Rejected by librdkafka at client creation, its error naming key and value.
const UNKNOWN: [(&str, &str); 7] = [
    ("ssl.truststore.password", "Qb1hunterF"),
    (
        "sasl.jaas.config",
        "ScramLoginModule required password=\"Qb2hunterG\";",
    ),
    ("basic.auth.user.info", "user:Qb3hunterH"),
    ("sasl.pasword", "Qb4hunterI"),
    ("ssl.key.passwd", "Qb5hunterJ"),
    ("sasl.oauthbearer.client.secert", "Qb6hunterK"),
    ("Sasl.Password", "Qb7hunterL"),
];

/// Each subcommand that takes Kafka settings, with the arguments it needs besides them.
fn subcommands() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        (
            "run",
            vec!["run", "--topic", "t", "--metrics-addr", "127.0.0.1:0"],
        ),
        (
            "run --once",
            vec![
                "run",
                "--topic",
                "t",
                "--once",
                "--metrics-addr",
                "127.0.0.1:0",
            ],
        ),
        ("inspect", vec!["inspect", "--topic", "t"]),
        ("retract", vec!["retract", "--topic", "t"]),
        (
            "loadgen",
            vec![
                "loadgen", "--topic", "t", "--alpha", "1", "--keys", "10", "--count", "10",
            ],
        ),
        (
            "consume",
            vec!["consume", "--topic", "t", "--duration-secs", "2"],
        ),
        ("demo", vec!["demo", "--duration-secs", "10"]),
        ("e2e", vec!["e2e"]),
        ("soak", vec!["soak", "--duration-secs", "5"]),
    ]
}

/// The binary of `subcommand`: dkg-sampler's own, or the lab's.
fn binary(subcommand: &str) -> std::path::PathBuf {
    if ["run", "inspect", "retract"].contains(&subcommand) {
        env!("CARGO_BIN_EXE_dkg-sampler").into()
    } else {
        dkg_testkit::process::workspace_bin("dkg-lab")
    }
}

fn command(args: &[&str], flags: &[(&str, &str)], env: &[(&str, &str)]) -> Command {
    let mut c = Command::new(binary(args[0]));
    c.args(args)
        .args(["--bootstrap-servers", "127.0.0.1:1"])
        .env("DKG_LOG", "debug,librdkafka=debug,rdkafka=debug")
        .env("DKG_STARTUP_TIMEOUT_SECS", "2")
        .env("DKG_INSPECT_TIMEOUT_SECS", "2")
        .env("DKG_RETRACT_TIMEOUT_SECS", "2")
        .env_remove("DKG_KAFKA_CONFIG")
        .env_remove("DKG_KAFKA_CONFIG_FILE");
    for (k, v) in flags {
        c.arg("--kafka-config").arg(format!("{k}={v}"));
    }
    if !env.is_empty() {
        let lines: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        c.env("DKG_KAFKA_CONFIG", lines.join("\n"));
    }
    c
}

/// Run every command side by side for at most `limit` each, then SIGKILL what still runs (the
/// sidecar and the tools that wait for the broker; none has started a child process before the
/// broker answers, and `consume` takes half a minute to stop on SIGTERM without one); their
/// outputs.
fn outputs(commands: Vec<(String, Command)>, limit: Duration) -> Vec<(String, String)> {
    let dir = std::env::temp_dir();
    let mut children: Vec<(String, LoggedChild)> = commands
        .into_iter()
        .enumerate()
        .map(|(i, (name, c))| {
            let log = dir.join(format!("dkg-redaction-{}-{i}.log", std::process::id()));
            (name.clone(), LoggedChild::spawn(&name, c, log))
        })
        .collect();
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline && children.iter_mut().any(|(_, c)| c.exited().is_none()) {
        std::thread::sleep(Duration::from_millis(50));
    }
    children
        .into_iter()
        .map(|(name, mut c)| {
            if c.exited().is_none() {
                c.kill();
            } else {
                c.wait_exit(Duration::ZERO); // reaped: nothing left to stop
            }
            (name, c.log())
        })
        .collect()
}

#[test]
fn no_secret_value_reaches_stdout_or_stderr_of_any_subcommand() {
    let mut commands = Vec::new();
    for (name, args) in subcommands() {
        // The known keys together (half as flags, half in the variable), then each unknown or
        // misspelt key alone (librdkafka stops at the first one it rejects).
        commands.push((
            format!("{name} [known keys]"),
            command(&args, &KNOWN[..2], &KNOWN[2..]),
        ));
        for (i, kv) in UNKNOWN.iter().enumerate() {
            let (flags, env) = if i % 2 == 0 {
                (vec![*kv], vec![])
            } else {
                (vec![], vec![*kv])
            };
            commands.push((format!("{name} [{}]", kv.0), command(&args, &flags, &env)));
        }
        // --help with the variable set.
        let mut help = command(&args, &[], &UNKNOWN);
        help.arg("--help");
        commands.push((format!("{name} --help"), help));
    }
    let total = commands.len();
    let outputs = outputs(commands, Duration::from_secs(5));
    assert_eq!(outputs.len(), total);
    let leaks: Vec<String> = outputs
        .iter()
        .filter(|(_, out)| out.contains(MARKER))
        .map(|(name, out)| {
            let lines: Vec<&str> = out.lines().filter(|l| l.contains(MARKER)).take(3).collect();
            format!("{name}:\n  {}", lines.join("\n  "))
        })
        .collect();
    assert!(
        leaks.is_empty(),
        "secret values in the output:\n{}",
        leaks.join("\n")
    );
    // The unknown keys were really given: librdkafka named them (redacted values).
    let named = outputs
        .iter()
        .filter(|(name, out)| {
            name.ends_with("[ssl.truststore.password]") && out.contains("ssl.truststore.password")
        })
        .count();
    assert!(named >= 1, "the rejected key is named: {outputs:?}");
    // Every command got past its arguments (a usage error would test nothing).
    let usage: Vec<&String> = outputs
        .iter()
        .filter(|(_, out)| out.contains("For more information, try '--help'"))
        .map(|(name, _)| name)
        .collect();
    assert!(usage.is_empty(), "usage errors: {usage:?}");
}
