//! Shared helpers for the integration tests. Tests that need Kafka run against the real single-node broker
//! started by `scripts/kafka start` (`scripts/test` and `.ci/run` start it): a missing broker fails the test with
//! a clear message; nothing here skips.
//!
//! Include with `mod common;` from a test file. What both crates' tests need (the broker probe, unique
//! topics, topic creation, assignment fixtures) is in the `dkg-testkit` crate.

// Each test binary compiles this module and uses only part of it.
#![allow(dead_code)]

#[cfg(feature = "kafka")]
pub mod java;
#[cfg(feature = "kafka")]
pub mod producer;
#[cfg(feature = "kafka")]
pub mod scenario;

// The broker probe, unique topics and topic creation are shared with the sampler's tests.
#[cfg(feature = "kafka")]
#[allow(unused_imports)] // not every test binary uses every helper
pub use dkg_testkit::broker::{
    BROKER_CHECK_TIMEOUT, DEFAULT_BOOTSTRAP, bootstrap, check_broker, create_topic, unique_topic,
};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The repository root (the workspace directory that holds `scripts/`).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the partitioner crate lives inside the workspace")
        .to_path_buf()
}

/// Runs `scripts/kafka ARGS` and returns its stdout, trimmed; panics with its stderr when it fails.
/// Tests use it for the classpath and to stop/start the broker (e.g. `kafka_script(&["restart"])`).
pub fn kafka_script(args: &[&str]) -> String {
    let mut script = Command::new(repo_root().join("scripts").join("kafka"));
    let what = format!("`scripts/kafka {}`", args.join(" "));
    dkg_testkit::process::run_ok(script.args(args), &what)
        .trim()
        .to_owned()
}

/// The classpath of the pinned Kafka version (kafka-clients, the broker, tools and their dependencies), from the
/// jar cache of `scripts/kafka` (resolved from Maven Central on first use). Panics if it cannot be had.
pub fn java_classpath() -> String {
    static CP: OnceLock<String> = OnceLock::new();
    CP.get_or_init(|| {
        let cp = kafka_script(&["classpath"]);
        assert!(
            cp.split(':').any(|j| j.contains("kafka-clients-")),
            "scripts/kafka classpath has no kafka-clients jar: {cp}"
        );
        cp
    })
    .clone()
}

/// `$JAVA_HOME/bin/<tool>`, or `<tool>` on the PATH without `JAVA_HOME`.
pub fn java_bin(tool: &str) -> PathBuf {
    match std::env::var_os("JAVA_HOME") {
        Some(home) if !home.is_empty() => Path::new(&home).join("bin").join(tool),
        _ => PathBuf::from(tool),
    }
}

/// Compiles the Java program `source` (a path from the repository's root) against the pinned Kafka
/// classpath ([`java_classpath`]), with `sourcepath` (from the root) for the classes it uses (javac
/// compiles only those it reaches); returns the classpath to run it with. Missing `javac` or a
/// failed compile panics: the Java tests never skip.
pub fn compile_java(source: &str, sourcepath: Option<&str>) -> String {
    compile_java_programs(&[source], sourcepath)
}

/// [`compile_java`] for several programs in one `javac` run (the classes they share compiled once):
/// one classpath runs any of them.
pub fn compile_java_programs(sources: &[&str], sourcepath: Option<&str>) -> String {
    let kafka_cp = java_classpath();
    let srcs: Vec<PathBuf> = sources.iter().map(|s| repo_root().join(s)).collect();
    for src in &srcs {
        assert!(src.is_file(), "{} is missing", src.display());
    }
    let stem = srcs[0]
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let classes = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("java-classes-{stem}-{}", std::process::id()));
    std::fs::create_dir_all(&classes)
        .unwrap_or_else(|e| panic!("create {}: {e}", classes.display()));
    let javac = java_bin("javac");
    let mut command = Command::new(&javac);
    command.arg("-d").arg(&classes).arg("-cp").arg(&kafka_cp);
    if let Some(path) = sourcepath {
        command.arg("-sourcepath").arg(repo_root().join(path));
    }
    let out = command.args(&srcs).output().unwrap_or_else(|e| {
        panic!(
            "cannot run {} ({e}): the Java tests need a JDK 17+ (apt-get install openjdk-17-jdk-headless)",
            javac.display()
        )
    });
    assert!(
        out.status.success(),
        "javac {} failed:\n{}",
        sources.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    format!("{kafka_cp}:{}", classes.display())
}
