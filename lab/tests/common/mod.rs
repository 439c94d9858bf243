//! Helpers shared by the tests that run a `dkg-lab` command end to end (`e2e_cli`, `soak_cli`).
// Each test binary uses a part of them.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use dkg_testkit::broker::{bootstrap, unique_topic};
pub use dkg_testkit::process::run_ok;
use serde_json::Value;

/// `dkg-lab <command> --bootstrap-servers <the test broker> --topic-prefix <prefix> --out-dir
/// <out>` with `DKG_LOG=warn`, for a fresh `prefix` from `name`; the test adds its own flags.
/// Returns the command and `out`.
pub fn lab(command: &str, name: &str) -> (Command, PathBuf) {
    let prefix = unique_topic(name);
    let out = std::env::temp_dir().join(&prefix);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dkg-lab"));
    cmd.arg(command)
        .args([
            "--bootstrap-servers",
            &bootstrap(),
            "--topic-prefix",
            &prefix,
        ])
        .arg("--out-dir")
        .arg(&out)
        .env("DKG_LOG", "warn");
    (cmd, out)
}

/// The number `what` of the JSON object `v`.
pub fn num(v: &Value, what: &str) -> f64 {
    v[what]
        .as_f64()
        .unwrap_or_else(|| panic!("{what} is not a number in {v}"))
}

/// The count `what` of the JSON object `v`.
pub fn count(v: &Value, what: &str) -> u64 {
    v[what]
        .as_u64()
        .unwrap_or_else(|| panic!("{what} is not a count in {v}"))
}

/// The JSON document at `path`.
pub fn read_json(path: &Path) -> Value {
    let json = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&json).expect("valid JSON")
}
