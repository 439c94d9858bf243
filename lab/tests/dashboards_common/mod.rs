//! Shared by `compose_stack.rs` and `dashboards_live.rs`: reading the Grafana dashboards in `dashboards/`,
//! the provisioning files in `deploy/`, and turning a panel's PromQL into what Grafana would send to
//! Prometheus (template variables and Grafana's `$__` interval macros substituted).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::Value as Json;
use serde_yaml_ng::Value as Yaml;

/// The repository root (the sampler crate is one level below it).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("sampler/ has a parent")
        .to_path_buf()
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

pub fn read_yaml(path: &Path) -> Yaml {
    let mut v: Yaml = serde_yaml_ng::from_str(&read(path))
        .unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display()));
    v.apply_merge()
        .unwrap_or_else(|e| panic!("{}: YAML merge keys: {e}", path.display()));
    v
}

/// Every `*.json` in `dashboards/`, parsed, sorted by file name.
pub fn dashboards() -> Vec<(PathBuf, Json)> {
    let dir = repo_root().join("dashboards");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no dashboard JSON in {}", dir.display());
    files
        .into_iter()
        .map(|p| {
            let json: Json = serde_json::from_str(&read(&p))
                .unwrap_or_else(|e| panic!("{} is not valid JSON: {e}", p.display()));
            (p, json)
        })
        .collect()
}

/// Where a PromQL expression sits in a dashboard.
#[derive(Debug, Clone)]
pub struct PanelQuery {
    pub dashboard: String,
    /// Panel title, or `annotation: <name>`.
    pub panel: String,
    pub ref_id: String,
    pub expr: String,
    pub is_annotation: bool,
}

impl std::fmt::Display for PanelQuery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} / {:?} / {}", self.dashboard, self.panel, self.ref_id)
    }
}

/// All panels, including those nested in (collapsed) rows.
pub fn panels(dash: &Json) -> Vec<&Json> {
    fn walk<'a>(list: &'a Json, out: &mut Vec<&'a Json>) {
        for p in list.as_array().into_iter().flatten() {
            out.push(p);
            if let Some(children) = p.get("panels") {
                walk(children, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(&dash["panels"], &mut out);
    out
}

/// Every PromQL expression of every panel target and every Prometheus annotation of a dashboard.
pub fn queries(name: &str, dash: &Json) -> Vec<PanelQuery> {
    let mut out = Vec::new();
    for p in panels(dash) {
        let title = p["title"].as_str().unwrap_or("<untitled>").to_string();
        for t in p["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = t["expr"].as_str() {
                out.push(PanelQuery {
                    dashboard: name.to_string(),
                    panel: title.clone(),
                    ref_id: t["refId"].as_str().unwrap_or("?").to_string(),
                    expr: expr.to_string(),
                    is_annotation: false,
                });
            }
        }
    }
    for a in dash["annotations"]["list"].as_array().into_iter().flatten() {
        if let Some(expr) = a["expr"].as_str() {
            out.push(PanelQuery {
                dashboard: name.to_string(),
                panel: format!("annotation: {}", a["name"].as_str().unwrap_or("?")),
                ref_id: "annotation".to_string(),
                expr: expr.to_string(),
                is_annotation: true,
            });
        }
    }
    out
}

/// The dashboard's template variables that queries use, with their current (default) values: the
/// datasource variable (which Prometheus to ask, `${datasource}` in the datasource references) is left out.
pub fn variables(dash: &Json) -> Vec<(String, String)> {
    dash["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["type"] != "datasource")
        .map(|v| {
            let name = v["name"]
                .as_str()
                .expect("variable without name")
                .to_string();
            let value = v["current"]["value"]
                .as_str()
                .or_else(|| v["query"].as_str())
                .unwrap_or_else(|| panic!("variable {name} has no current value"))
                .to_string();
            (name, value)
        })
        .collect()
}

/// Grafana's own macros, as Grafana fills them for a given scrape interval.
#[derive(Debug, Clone)]
pub struct Macros {
    pub interval: String,
    pub rate_interval: String,
    pub range: String,
}

/// Replaces `$var`, `${var}` and Grafana's `$__interval`, `$__rate_interval`, `$__range` in `expr`, as
/// Grafana does before it sends the query. Panics if a `$` is left (an unknown variable or an export
/// placeholder).
pub fn substitute(expr: &str, vars: &[(String, String)], macros: &Macros) -> String {
    let mut all: Vec<(String, String)> = vars.to_vec();
    all.push(("__rate_interval".into(), macros.rate_interval.clone()));
    all.push(("__interval".into(), macros.interval.clone()));
    all.push(("__range".into(), macros.range.clone()));
    // Longest names first: `$__rate_interval` before `$__range`, `$dkg_topic_x` before `$dkg_topic`.
    all.sort_by_key(|(name, _)| std::cmp::Reverse(name.len()));
    let mut s = expr.to_string();
    for (name, value) in &all {
        s = s.replace(&format!("${{{name}}}"), value);
        s = s.replace(&format!("${name}"), value);
    }
    assert!(
        !s.contains('$'),
        "unresolved variable in {expr:?} (after substitution: {s:?})"
    );
    s
}

/// Every `datasource.uid` referenced anywhere in a dashboard (panels, targets, annotations, variables).
pub fn datasource_uids(dash: &Json) -> Vec<String> {
    fn walk(v: &Json, out: &mut Vec<String>) {
        match v {
            Json::Object(map) => {
                for (k, child) in map {
                    if k == "datasource" {
                        match child {
                            Json::Object(ds) => {
                                if let Some(uid) = ds.get("uid").and_then(Json::as_str) {
                                    out.push(uid.to_string());
                                }
                            }
                            Json::String(s) => out.push(s.clone()),
                            _ => {}
                        }
                    }
                    walk(child, out);
                }
            }
            Json::Array(items) => items.iter().for_each(|c| walk(c, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(dash, &mut out);
    out
}

/// Grafana's built-in annotation datasource (not a provisioned one).
pub const GRAFANA_BUILTIN_UID: &str = "-- Grafana --";

/// The datasource reference of every query: the dashboard's datasource variable, so that the dashboard
/// imports into any Grafana (it picks the default Prometheus datasource, or the one the user chooses).
pub const DATASOURCE_VARIABLE_UID: &str = "${datasource}";

/// The name of the dashboard's template variable of type `datasource` for Prometheus, if it has one.
pub fn prometheus_datasource_variable(dash: &Json) -> Option<String> {
    dash["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["type"] == "datasource" && v["query"] == "prometheus")
        .and_then(|v| v["name"].as_str())
        .map(str::to_string)
}

/// The datasources provisioned from `deploy/grafana/provisioning/datasources/*.yml`: (uid, type, url).
pub fn provisioned_datasources() -> Vec<(String, String, String)> {
    let dir = repo_root().join("deploy/grafana/provisioning/datasources");
    let mut out = Vec::new();
    for entry in
        std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
    {
        let path = entry.expect("dir entry").path();
        if !path.extension().is_some_and(|x| x == "yml" || x == "yaml") {
            continue;
        }
        let y = read_yaml(&path);
        for ds in y["datasources"].as_sequence().into_iter().flatten() {
            let field = |k: &str| {
                ds[k]
                    .as_str()
                    .unwrap_or_else(|| panic!("{}: datasource without {k}", path.display()))
                    .to_string()
            };
            out.push((field("uid"), field("type"), field("url")));
        }
    }
    out
}
