//! What the demo reads from the samplers: a minimal HTTP GET, a parser of the Prometheus text exposition
//! format (<https://prometheus.io/docs/instrumenting/exposition_formats/>), and the [`View`] of one
//! sampler's topic built from its `dkg_sampler_*` series.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::Context;

use super::Side;

/// A minimal HTTP/1.0 GET on a loopback address: (status code, body).
pub(super) fn http_get(addr: SocketAddr, path: &str) -> anyhow::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .context("malformed HTTP response")?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("malformed HTTP status line")?;
    Ok((code, body.to_string()))
}

/// Samples of the Prometheus text exposition format: (metric name, labels, value).
type Samples = Vec<(String, BTreeMap<String, String>, f64)>;

/// Parses the Prometheus text format (comments skipped; label values unescaped).
fn parse_metrics(text: &str) -> Samples {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, rest) = match line.find(['{', ' ']) {
            Some(i) => line.split_at(i),
            None => continue,
        };
        let mut labels = BTreeMap::new();
        let mut rest = rest;
        if let Some(body) = rest.strip_prefix('{') {
            let mut chars = body.char_indices().peekable();
            let mut end = None;
            loop {
                // label name
                while chars
                    .peek()
                    .is_some_and(|(_, c)| *c == ',' || c.is_whitespace())
                {
                    chars.next();
                }
                match chars.peek() {
                    Some((i, '}')) => {
                        end = Some(*i);
                        break;
                    }
                    None => break,
                    _ => {}
                }
                let mut key = String::new();
                for (_, c) in chars.by_ref() {
                    if c == '=' {
                        break;
                    }
                    key.push(c);
                }
                if chars.next().map(|(_, c)| c) != Some('"') {
                    break;
                }
                let mut value = String::new();
                while let Some((_, c)) = chars.next() {
                    match c {
                        '\\' => match chars.next().map(|(_, c)| c) {
                            Some('n') => value.push('\n'),
                            Some(other) => value.push(other),
                            None => break,
                        },
                        '"' => break,
                        c => value.push(c),
                    }
                }
                labels.insert(key.trim().to_string(), value);
            }
            let Some(end) = end else { continue };
            rest = &body[end + 1..];
        }
        let Some(value) = rest
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
        else {
            continue;
        };
        out.push((name.to_string(), labels, value));
    }
    out
}

/// What one sampler shows about its topic.
#[derive(Debug, Default, Clone)]
pub(super) struct View {
    pub(super) share: BTreeMap<u32, f64>,
    pub(super) rate: BTreeMap<u32, f64>,
    pub(super) observed: Option<f64>,
    pub(super) bound: Option<f64>,
    pub(super) epoch: u64,
    pub(super) publishes: u64,
    pub(super) heavy_hitters: Option<f64>,
    pub(super) top_keys: Vec<(u32, String, f64)>,
    pub(super) consumed: f64,
}

impl View {
    pub(super) fn from_samples(samples: &Samples, topic: &str) -> Self {
        let mut v = View::default();
        for (name, labels, value) in samples {
            if labels.get("topic").map(String::as_str) != Some(topic) {
                continue;
            }
            let partition = labels.get("partition").and_then(|p| p.parse::<u32>().ok());
            match (name.as_str(), partition) {
                ("dkg_sampler_partition_share_ratio", Some(p)) => {
                    v.share.insert(p, *value);
                }
                ("dkg_sampler_partition_records_per_second", Some(p)) => {
                    v.rate.insert(p, *value);
                }
                ("dkg_sampler_observed_imbalance_ratio", _) => v.observed = Some(*value),
                ("dkg_sampler_key_grouping_bound_ratio", _) => v.bound = Some(*value),
                ("dkg_sampler_epoch", _) => v.epoch = *value as u64,
                ("dkg_sampler_publishes_total", _) => v.publishes = *value as u64,
                ("dkg_sampler_heavy_hitters", _) => v.heavy_hitters = Some(*value),
                ("dkg_sampler_records_consumed_total", _) => v.consumed = *value,
                ("dkg_sampler_heavy_key_share_ratio", _) => {
                    let rank = labels
                        .get("rank")
                        .and_then(|r| r.parse().ok())
                        .unwrap_or(u32::MAX);
                    let key = labels.get("key").cloned().unwrap_or_default();
                    v.top_keys.push((rank, key, *value));
                }
                _ => {}
            }
        }
        v.top_keys.sort_by_key(|(rank, _, _)| *rank);
        v
    }
}

/// The view of `side`'s topic from its sampler's `/metrics`; `None` while it does not answer.
pub(super) fn scrape(side: &Side) -> Option<View> {
    match http_get(side.metrics, "/metrics") {
        Ok((200, body)) => Some(View::from_samples(&parse_metrics(&body), &side.topic)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_text_format_with_escaped_labels() {
        let text = "# HELP x y\n# TYPE dkg_sampler_epoch gauge\n\
            dkg_sampler_epoch{topic=\"t\"} 3\n\
            dkg_sampler_heavy_key_share_ratio{key=\"a\\\"b,c}\",rank=\"1\",topic=\"t\"} 0.25\n\
            dkg_sampler_partition_share_ratio{partition=\"10\",topic=\"t\"} 1e-1\n\
            dkg_sampler_partition_share_ratio{partition=\"2\",topic=\"other\"} 0.9\n\
            up 1\n";
        let samples = parse_metrics(text);
        assert_eq!(samples.len(), 5, "{samples:?}");
        let v = View::from_samples(&samples, "t");
        assert_eq!(v.epoch, 3);
        assert_eq!(v.top_keys, vec![(1, "a\"b,c}".to_string(), 0.25)]);
        assert_eq!(v.share, BTreeMap::from([(10, 0.1)]));
    }
}
