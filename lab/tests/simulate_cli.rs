//! `dkg-lab simulate` end to end: runs the real binary on small grids.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn sampler(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dkg-lab"))
        .args(args)
        // The environment must not leak into the flags under test.
        .env_remove("DKG_LOG")
        .env("RUST_LOG", "warn")
        .output()
        .expect("run dkg-sampler")
}

fn json_rows(args: &[&str]) -> Vec<Value> {
    let mut all = vec!["simulate", "--json"];
    all.extend_from_slice(args);
    let out = sampler(&all);
    assert!(
        out.status.success(),
        "dkg-sampler {all:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dkg-simulate-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// (alpha, k) -> algorithm -> row.
fn by_cell(rows: &[Value]) -> HashMap<(String, u64), HashMap<String, Value>> {
    let mut cells: HashMap<(String, u64), HashMap<String, Value>> = HashMap::new();
    for row in rows {
        let key = (row["alpha"].to_string(), row["k"].as_u64().unwrap());
        let algorithm = row["algorithm"].as_str().unwrap().to_string();
        cells.entry(key).or_default().insert(algorithm, row.clone());
    }
    cells
}

fn lambda(row: &Value) -> f64 {
    row["lambda_mean_pct"].as_f64().unwrap()
}

#[test]
fn json_grid_is_complete_and_ordered_by_quality() {
    let rows = json_rows(&[
        "--alpha", "0.8,1.5", "--k", "4,16", "--n", "2000", "--m", "60000", "--seeds", "2",
    ]);
    // 2 alphas x 2 k x 8 algorithms.
    assert_eq!(rows.len(), 32);
    let cells = by_cell(&rows);
    assert_eq!(cells.len(), 4);
    for ((alpha, k), algos) in &cells {
        let get = |name: &str| &algos[name];
        for name in [
            "hash",
            "dkg",
            "dkg-paper",
            "dkg-split",
            "lpt-learn",
            "lpt-full",
            "bound",
            "pkg",
        ] {
            let row = get(name);
            assert_eq!(row["source"], "zipf");
            assert_eq!(row["n"], 2000);
            assert_eq!(row["m"], 60000);
            assert_eq!(row["seeds"], 2);
            assert_eq!(row["lambda_pct"].as_array().unwrap().len(), 2);
            let worst = row["lambda_worst_pct"].as_f64().unwrap();
            assert!(
                worst >= lambda(row) - 1e-9,
                "{alpha}/{k}/{name}: worst below mean"
            );
            let pkg_metric = row["max_minus_mean_over_m_pct"].as_f64().unwrap();
            assert!((pkg_metric - lambda(row) / *k as f64).abs() < 1e-6);
            let dkg = name.starts_with("dkg");
            assert_eq!(row["heavy_hitters"].is_null(), !dkg, "{name}");
            assert_eq!(row["theta"].is_null(), !dkg, "{name}");
            assert_eq!(row["mu"].is_null(), !dkg, "{name}");
            let splits = name == "dkg-split" || name == "pkg";
            assert_eq!(row["split_keys"].is_null(), !splits, "{name}");
            assert_eq!(
                row["split_keys_at_most_fair"].is_null(),
                name != "dkg-split",
                "{name}"
            );
        }
        // Splitting only ever helps, and only keys above a fair share split.
        assert!(
            lambda(get("dkg-split")) <= lambda(get("dkg")) + 1e-9,
            "{alpha}/{k}: dkg-split worse than dkg"
        );
        assert_eq!(get("dkg-split")["split_keys_at_most_fair"], 0);
        let bound = lambda(get("bound"));
        let full = lambda(get("lpt-full"));
        assert!(
            full <= lambda(get("hash")) + 1e-9,
            "{alpha}/{k}: lpt-full worse than hash"
        );
        assert!(bound <= full + 1e-9, "{alpha}/{k}: bound above lpt-full");
        for name in ["hash", "dkg", "dkg-paper", "lpt-learn"] {
            assert!(
                lambda(get(name)) >= bound - 1e-9,
                "{alpha}/{k}: {name} beats the bound"
            );
        }
        assert_eq!(get("dkg-paper")["theta"].as_f64(), Some(0.1));
        assert_eq!(get("dkg-paper")["mu"].as_f64(), Some(2.0));
        // bound_pct is reported on every row and is the bound's own lambda.
        assert!((get("hash")["bound_pct"].as_f64().unwrap() - bound).abs() < 1e-9);
    }
    // alpha 1.5 with k = 16: the top key holds ~39% of the stream, so every key grouping hits the bound.
    let hot = &cells[&("1.5".to_string(), 16)];
    assert!(lambda(&hot["bound"]) > 400.0);
    assert!((lambda(&hot["lpt-full"]) - lambda(&hot["bound"])).abs() < 1e-9);
    // ... except dkg-split, which spreads the few keys over 1/16.
    assert!(lambda(&hot["dkg-split"]) < 10.0, "{}", hot["dkg-split"]);
    assert!(hot["dkg-split"]["split_keys"].as_f64().unwrap() >= 1.0);
}

#[test]
fn runs_are_reproducible_and_overrides_apply() {
    let args = [
        "--alpha",
        "1.0",
        "--k",
        "8",
        "--n",
        "1000",
        "--m",
        "20000",
        "--seeds",
        "1",
        "--algorithms",
        "dkg,hash",
        "--theta",
        "0.5/k",
        "--mu",
        "16",
    ];
    let a = json_rows(&args);
    let b = json_rows(&args);
    assert_eq!(a, b);
    assert_eq!(a.len(), 2);
    assert_eq!(
        a[0]["algorithm"], "dkg",
        "--algorithms order is the output order"
    );
    assert_eq!(a[0]["theta"].as_f64(), Some(0.0625));
    assert_eq!(a[0]["mu"].as_f64(), Some(16.0));
    let other_seed = json_rows(&[&args[..], &["--rng-seed", "99"]].concat());
    assert_ne!(a[1]["lambda_pct"], other_seed[1]["lambda_pct"]);
}

#[test]
fn learning_everything_gets_close_to_the_optimum() {
    // With the whole stream learned and a fine table, dkg is within a few points of lpt-full.
    let rows = json_rows(&[
        "--alpha",
        "0.8",
        "--k",
        "10",
        "--n",
        "2000",
        "--m",
        "50000",
        "--seeds",
        "1",
        "--learn-fraction",
        "1.0",
        "--algorithms",
        "dkg,lpt-full,hash",
        "--mu",
        "64",
    ]);
    let cell = &by_cell(&rows)[&("0.8".to_string(), 10)];
    let (dkg, full, hash) = (
        lambda(&cell["dkg"]),
        lambda(&cell["lpt-full"]),
        lambda(&cell["hash"]),
    );
    assert!(dkg <= full + 5.0, "dkg {dkg} vs lpt-full {full}");
    assert!(dkg < hash, "dkg {dkg} vs hash {hash}");
}

#[test]
fn trace_file_is_one_key_per_line() {
    let dir = scratch_dir("trace");
    let path = dir.join("keys.txt");
    // "hot" is half the records, 200 other keys (CRLF on some lines) share the rest.
    let mut text = String::new();
    for i in 0..4000 {
        if i % 2 == 0 {
            text.push_str("hot\n");
        } else if i % 3 == 0 {
            text.push_str(&format!("user-{}\r\n", (i / 2) % 200));
        } else {
            text.push_str(&format!("user-{}\n", (i / 2) % 200));
        }
    }
    std::fs::write(&path, text).unwrap();
    let path_arg = path.to_str().unwrap();
    let rows = json_rows(&["--trace", path_arg, "--k", "4,8"]);
    assert_eq!(rows.len(), 16);
    for row in &rows {
        assert_eq!(row["source"], path_arg);
        assert!(row["alpha"].is_null());
        assert_eq!(row["m"], 4000);
        assert_eq!(row["n"], 201, "CRLF and LF lines are the same key");
        assert_eq!(row["seeds"], 1);
    }
    let cells = by_cell(&rows);
    // p1 = 0.5: bound = k/2 - 1.
    assert!((lambda(&cells[&("null".to_string(), 4)]["bound"]) - 100.0).abs() < 1e-9);
    assert!((lambda(&cells[&("null".to_string(), 8)]["bound"]) - 300.0).abs() < 1e-9);
    // The hot key is a heavy hitter: dkg isolates it and meets the bound.
    let dkg8 = &cells[&("null".to_string(), 8)]["dkg"];
    assert!(dkg8["heavy_hitters"].as_f64().unwrap() >= 1.0);
    assert!((lambda(dkg8) - 300.0).abs() < 1e-9, "{dkg8}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn table_is_the_default_output() {
    let out = sampler(&[
        "simulate", "--alpha", "1.0", "--k", "5,10", "--n", "500", "--m", "5000", "--seeds", "1",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    for name in [
        "source",
        "alpha",
        "hash",
        "dkg-paper",
        "dkg",
        "lpt-full",
        "bound",
        "pkg",
    ] {
        assert!(lines[0].contains(name), "header lacks {name}: {stdout}");
    }
    assert!(
        lines[1].starts_with("zipf") && lines[2].starts_with("zipf"),
        "{stdout}"
    );
    // Every column after `k` is explained in the output itself (issue 32: dkg-paper, lpt-learn, bound
    // and the `:split` counts were not).
    for column in lines[0].split_whitespace().skip(3) {
        assert!(
            stdout.lines().any(|l| l.starts_with('#')
                && l.trim_start_matches('#').split_whitespace().next() == Some(column)),
            "{column} is not explained:\n{stdout}"
        );
    }
    assert!(
        stdout.contains("dkg-split:split") && stdout.contains("a COUNT, not a percentage"),
        "{stdout}"
    );
}

/// Keys heavy in bytes are not the keys heavy in records (sizes drawn per key, independently of rank):
/// balancing records leaves the bytes skewed, `--weight bytes` balances them (down to the bound here).
#[test]
fn weight_bytes_balances_the_bytes() {
    let base: Vec<&str> = "--alpha 0.8 --k 10 --n 2000 --m 100000 --seeds 2 \
                           --value-bytes lognormal:6,1 --algorithms hash,dkg,lpt-full,bound"
        .split_whitespace()
        .collect();
    let run = |weight: &str| {
        let rows = json_rows(&[&base[..], &["--weight", weight]].concat());
        assert_eq!(rows.len(), 4);
        let mut cells = by_cell(&rows);
        assert_eq!(cells.len(), 1);
        cells.drain().next().unwrap().1
    };
    let bytes_of = |row: &Value| row["lambda_bytes_mean_pct"].as_f64().unwrap();
    let (by_records, by_bytes) = (run("records"), run("bytes"));
    for (weight, rows) in [("records", &by_records), ("bytes", &by_bytes)] {
        for row in rows.values() {
            assert_eq!(row["weight"], weight);
            assert_eq!(row["lambda_bytes_pct"].as_array().unwrap().len(), 2);
        }
        // Nothing beats the key-grouping bound on what it balances.
        let bound = bytes_of(&rows["bound"]);
        assert!(bytes_of(&rows["lpt-full"]) >= bound - 1e-9);
        assert!(bytes_of(&rows["dkg"]) >= bound - 1e-9);
    }
    // Hash learns nothing: the same either way.
    assert_eq!(
        by_records["hash"]["lambda_pct"],
        by_bytes["hash"]["lambda_pct"]
    );
    assert_eq!(
        by_records["hash"]["lambda_bytes_pct"],
        by_bytes["hash"]["lambda_bytes_pct"]
    );
    let (dkg_records, dkg_bytes) = (&by_records["dkg"], &by_bytes["dkg"]);
    // Balancing records balances records ...
    assert!(lambda(dkg_records) < 10.0, "{dkg_records}");
    // ... and leaves most of hash's byte skew; balancing bytes removes much more of it.
    let hash_bytes = bytes_of(&by_records["hash"]);
    assert!(
        bytes_of(dkg_bytes) < 0.7 * bytes_of(dkg_records),
        "{dkg_bytes} vs {dkg_records}"
    );
    assert!(
        bytes_of(dkg_bytes) < 0.5 * hash_bytes,
        "{dkg_bytes} vs hash {hash_bytes}"
    );

    // The default output has no byte fields; the table gets `<algorithm>:bytes` columns.
    let plain = json_rows(&[
        "--alpha", "0.8", "--k", "10", "--n", "500", "--m", "5000", "--seeds", "1",
    ]);
    assert!(
        plain
            .iter()
            .all(|r| r.get("lambda_bytes_mean_pct").is_none() && r.get("weight").is_none())
    );
    let out = sampler(&[&["simulate"][..], &base[..], &["--weight", "bytes"]].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("balancing bytes"), "{table}");
    let header = table.lines().find(|l| l.starts_with("source")).unwrap();
    for column in ["hash:bytes", "dkg:bytes", "lpt-full:bytes", "bound:bytes"] {
        assert!(header.contains(column), "{column} missing: {header}");
    }
}

#[test]
fn plot_is_written_as_png() {
    let dir = scratch_dir("plot");
    let path = dir.join("chart.png");
    let out = sampler(&[
        "simulate",
        "--alpha",
        "0.5,1.0",
        "--k",
        "5,10",
        "--n",
        "500",
        "--m",
        "5000",
        "--seeds",
        "1",
        "--plot",
        path.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&path).unwrap();
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(
        bytes.len() > 10_000,
        "suspiciously small PNG: {} bytes",
        bytes.len()
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// Bad input: non-zero exit, nothing on stdout, and a message naming the problem.
#[test]
fn bad_input_is_rejected_clearly() {
    let missing = std::env::temp_dir().join("dkg-simulate-no-such-trace.txt");
    let empty_dir = scratch_dir("empty");
    let empty = empty_dir.join("empty.txt");
    std::fs::write(&empty, "").unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--trace", missing.to_str().unwrap()],
            "cannot read trace file",
        ),
        (vec!["--trace", empty.to_str().unwrap()], "empty"),
        (vec!["--alpha", "0.5,abc"], "abc"),
        (vec!["--alpha", "-1"], "alpha"),
        (vec!["--k", "0"], "k must be between 1"),
        (vec!["--k", "5,,10"], "partition count"),
        (vec!["--n", "0"], "n must be"),
        (vec!["--learn-fraction", "0"], "learn fraction"),
        (vec!["--learn-fraction", "1.5"], "learn fraction"),
        (vec!["--theta", "2"], "theta must be in (0, 1]"),
        (vec!["--theta", "0.5/q"], "0.5/k"),
        (vec!["--mu", "-3"], "mu must be"),
        (vec!["--algorithms", "hash,magic"], "magic"),
        (vec!["--value-bytes", "lognormal:6"], "MU,SIGMA"),
        (vec!["--value-bytes", "zipf:2"], "fixed:N or lognormal"),
        (vec!["--weight", "bytes"], "needs record sizes"),
        (vec!["--weight", "kilos"], "kilos"),
        (
            vec!["--trace", "x.txt", "--alpha", "1.0"],
            "cannot be used with",
        ),
    ];
    for (args, needle) in cases {
        // A small grid, so that a wrongly accepted case fails fast instead of running the full grid.
        let mut all = vec!["simulate", "--m", "1000", "--seeds", "1"];
        if args.contains(&"--trace") {
            all.truncate(1);
        }
        all.extend(args.iter().copied());
        let out = sampler(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{all:?} succeeded");
        assert!(out.stdout.is_empty(), "{all:?} printed results");
        assert!(
            stderr.contains(needle),
            "{all:?}: stderr lacks {needle:?}: {stderr}"
        );
    }
    std::fs::remove_dir_all(empty_dir).unwrap();
}
