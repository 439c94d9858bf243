//! The dashboards, checked without a server: layout, ids, datasource references, template variables, and
//! that every metric a query names is one of the binding metric contract's (so a typo in a panel whose
//! data only a consumer produces cannot hide until someone runs one). `dashboards_live.rs` evaluates
//! the same expressions against a real Prometheus.
#![allow(clippy::unwrap_used)]

mod dashboards_common;

use std::collections::BTreeSet;

use dashboards_common::{
    DATASOURCE_VARIABLE_UID, GRAFANA_BUILTIN_UID, Macros, dashboards, datasource_uids, panels,
    prometheus_datasource_variable, queries, substitute, variables,
};

/// The metric contract (team METRICS.md), plus Prometheus' own `up`.
const CONTRACT: &[&str] = &[
    "dkg_producer_records_total",
    "dkg_producer_partition_records_total",
    "dkg_producer_epoch",
    "dkg_producer_assignment_age_seconds",
    "dkg_producer_assignments_rejected_total",
    "dkg_sampler_partition_records_per_second",
    "dkg_sampler_partition_bytes_per_second",
    "dkg_sampler_weight_info",
    "dkg_sampler_partition_share_ratio",
    "dkg_sampler_observed_imbalance_ratio",
    "dkg_sampler_predicted_imbalance_ratio",
    "dkg_sampler_heavy_hitters",
    "dkg_sampler_split_keys",
    "dkg_sampler_heavy_key_share_ratio",
    "dkg_sampler_epoch",
    "dkg_sampler_publishes_total",
    "dkg_sampler_moved_load_share_ratio",
    "dkg_sampler_records_sampled_total",
    "dkg_sampler_records_consumed_total",
    "dkg_sampler_records_skipped_total",
    "dkg_sampler_consumer_lag_records",
    "dkg_sampler_key_grouping_bound_ratio",
    "dkg_sampler_misplaced_records_ratio",
    "dkg_sampler_misplaced_records_total",
    "dkg_sampler_placement_checked_records_total",
    "dkg_consumer_records_total",
    "dkg_consumer_member_records_total",
    "dkg_consumer_lag_records",
    "dkg_consumer_held_records",
    "dkg_consumer_hold_seconds",
    "up",
];

/// The metric names of a PromQL expression: identifiers followed by `{`, or known prefixes.
fn metric_names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let word = &expr[start..i];
            let in_string = expr[..start].matches('"').count() % 2 == 1;
            if !in_string
                && (word.starts_with("dkg_") || (word == "up" && bytes.get(i) == Some(&b'{')))
            {
                // Histogram series of a contract histogram.
                let base = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| word.strip_suffix(s).filter(|b| CONTRACT.contains(b)))
                    .unwrap_or(word);
                out.push(base.to_string());
            }
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn every_dashboard_query_names_contract_metrics_and_known_variables() {
    let macros = Macros {
        interval: "15s".into(),
        rate_interval: "1m".into(),
        range: "1h".into(),
    };
    let mut used = BTreeSet::new();
    for (path, dash) in dashboards() {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let vars = variables(&dash);
        let qs = queries(&name, &dash);
        assert!(!qs.is_empty(), "{name}: no queries");
        for q in qs {
            // Panics on an unknown `$variable`.
            let expr = substitute(&q.expr, &vars, &macros);
            let names = metric_names(&expr);
            assert!(!names.is_empty(), "{q}: names no metric: {expr}");
            for m in names {
                assert!(
                    CONTRACT.contains(&m.as_str()),
                    "{q}: {m} is not in the metric contract"
                );
                used.insert(m);
            }
        }
    }
    // The panels: each family of the contract appears somewhere.
    for must in [
        "dkg_sampler_partition_records_per_second",
        "dkg_sampler_partition_bytes_per_second",
        "dkg_sampler_partition_share_ratio",
        "dkg_sampler_observed_imbalance_ratio",
        "dkg_sampler_predicted_imbalance_ratio",
        "dkg_sampler_heavy_key_share_ratio",
        "dkg_sampler_epoch",
        "dkg_sampler_publishes_total",
        "dkg_sampler_moved_load_share_ratio",
        "dkg_producer_records_total",
        "dkg_producer_assignments_rejected_total",
        "dkg_consumer_lag_records",
        "dkg_consumer_held_records",
        "dkg_sampler_misplaced_records_ratio",
        "dkg_sampler_misplaced_records_total",
    ] {
        assert!(used.contains(must), "no panel shows {must}");
    }
}

#[test]
fn dashboards_have_stable_ids_and_a_sane_layout() {
    let mut uids = BTreeSet::new();
    for (path, dash) in dashboards() {
        let name = path.display().to_string();
        let uid = dash["uid"].as_str().unwrap_or_default().to_string();
        assert!(!uid.is_empty(), "{name}: no uid");
        assert!(uids.insert(uid.clone()), "{name}: uid {uid} used twice");
        assert!(
            dash["title"].as_str().is_some_and(|t| !t.is_empty()),
            "{name}: title"
        );
        assert!(
            dash["schemaVersion"].as_u64().is_some(),
            "{name}: schemaVersion"
        );
        let mut ids = BTreeSet::new();
        for p in panels(&dash) {
            let title = p["title"].as_str().unwrap_or_default();
            let id = p["id"]
                .as_u64()
                .unwrap_or_else(|| panic!("{name}: panel {title:?} has no id"));
            assert!(ids.insert(id), "{name}: panel id {id} used twice");
            let g = &p["gridPos"];
            let (x, w, h) = (
                g["x"].as_u64().unwrap(),
                g["w"].as_u64().unwrap(),
                g["h"].as_u64().unwrap(),
            );
            assert!(
                x + w <= 24 && w > 0 && h > 0,
                "{name}: panel {title:?} gridPos {g}"
            );
            if p["type"] == "row" {
                continue;
            }
            assert!(!title.is_empty(), "{name}: a panel without a title");
            let targets = p["targets"].as_array().map(Vec::len).unwrap_or(0);
            assert!(targets > 0, "{name}: panel {title:?} has no query");
            let mut refs = BTreeSet::new();
            for t in p["targets"].as_array().unwrap() {
                assert!(
                    refs.insert(t["refId"].as_str().unwrap_or_default()),
                    "{name}: {title:?} refIds"
                );
            }
        }
        // Panels do not overlap (rows included, 24-column grid).
        let boxes: Vec<(u64, u64, u64, u64, String)> = panels(&dash)
            .iter()
            .map(|p| {
                let g = &p["gridPos"];
                (
                    g["x"].as_u64().unwrap(),
                    g["y"].as_u64().unwrap(),
                    g["w"].as_u64().unwrap(),
                    g["h"].as_u64().unwrap(),
                    p["title"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        for (i, a) in boxes.iter().enumerate() {
            for b in &boxes[i + 1..] {
                let overlap =
                    a.0 < b.0 + b.2 && b.0 < a.0 + a.2 && a.1 < b.1 + b.3 && b.1 < a.1 + a.3;
                assert!(!overlap, "{name}: panels {:?} and {:?} overlap", a.4, b.4);
            }
        }
    }
}

#[test]
fn metric_names_are_extracted_from_promql() {
    let cases: [(&str, &[&str]); 4] = [
        (
            "max(dkg_sampler_epoch{topic=\"t\"})",
            &["dkg_sampler_epoch"],
        ),
        (
            "histogram_quantile(0.5, sum by (le) (rate(dkg_consumer_hold_seconds_bucket[1m])))",
            &["dkg_consumer_hold_seconds"],
        ),
        ("up{job=~\"dkg-.*\"}", &["up"]),
        (
            "sum(rate(dkg_x_total{route=\"dkg_not_a_metric\"}[1m]))",
            &["dkg_x_total"],
        ),
    ];
    for (expr, want) in cases {
        assert_eq!(metric_names(expr), want.to_vec(), "{expr}");
    }
}

/// Imported into any Grafana, the dashboard shows data: every query asks the datasource variable (no
/// datasource uid of this project's Grafana, no export placeholder), and the topic selectors list the
/// topics the samplers report (`label_values` of a contract metric), defaulting to the demo's topics.
#[test]
fn dashboards_import_anywhere_datasource_variable_and_topic_selectors_from_label_values() {
    for (path, dash) in dashboards() {
        let name = path.display().to_string();
        let var = prometheus_datasource_variable(&dash)
            .unwrap_or_else(|| panic!("{name}: no datasource variable of type prometheus"));
        assert_eq!(format!("${{{var}}}"), DATASOURCE_VARIABLE_UID, "{name}");
        for u in datasource_uids(&dash) {
            assert!(
                u == DATASOURCE_VARIABLE_UID || u == GRAFANA_BUILTIN_UID,
                "{name}: datasource {u:?} is not {DATASOURCE_VARIABLE_UID}"
            );
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("${DS_"), "{name}: export placeholder");
        assert!(dash.get("__inputs").is_none(), "{name}: __inputs");
        let list = dash["templating"]["list"].as_array().unwrap();
        let mut topic_vars = 0;
        for v in list.iter().filter(|v| v["type"] != "datasource") {
            let vname = v["name"].as_str().unwrap();
            assert_eq!(
                v["type"], "query",
                "{name}: variable {vname} is no query variable"
            );
            assert_eq!(
                v["datasource"]["uid"], DATASOURCE_VARIABLE_UID,
                "{name}: variable {vname}"
            );
            let q = v["query"]["query"]
                .as_str()
                .or_else(|| v["query"].as_str())
                .unwrap_or_else(|| panic!("{name}: variable {vname} has no query"));
            let inner = q
                .strip_prefix("label_values(")
                .and_then(|r| r.strip_suffix(", topic)"))
                .unwrap_or_else(|| {
                    panic!("{name}: {vname}: {q:?} is not label_values(<metric>, topic)")
                });
            assert!(
                CONTRACT.contains(&inner.trim()),
                "{name}: {vname}: {inner} is not in the metric contract"
            );
            topic_vars += 1;
        }
        assert!(topic_vars >= 2, "{name}: the DKG and hash topic selectors");
        assert_eq!(
            variables(&dash),
            vec![
                ("dkg_topic".to_string(), "orders-dkg".to_string()),
                ("hash_topic".to_string(), "orders-hash".to_string())
            ],
            "{name}: defaults are the compose stack's topics"
        );
    }
}
