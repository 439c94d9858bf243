//! Aggregation over seeds and the two text outputs (aligned table, JSON lines).

use std::io::Write;

use serde::Serialize;

use super::algorithms::{Algorithm, Outcome};

/// One (source, alpha, k) cell of the grid.
#[derive(Clone, Debug)]
pub struct Cell {
    /// `zipf` or the trace path.
    pub source: String,
    /// Zipf exponent (None for traces).
    pub alpha: Option<f64>,
    /// Partition count.
    pub k: u32,
    /// Distinct keys (the key universe for Zipf).
    pub n: usize,
    /// Records per stream.
    pub m: usize,
}

/// Results of one algorithm on one cell, one entry per seed.
#[derive(Clone, Debug)]
pub struct Row {
    /// The cell.
    pub cell: Cell,
    /// The algorithm.
    pub algorithm: Algorithm,
    /// theta used (DKG variants).
    pub theta: Option<f64>,
    /// mu used (DKG variants).
    pub mu: Option<f64>,
    /// Share of each stream learned on.
    pub learn_fraction: f64,
    /// Per-seed outcomes.
    pub outcomes: Vec<Outcome>,
    /// Per-seed key-grouping lower bounds (in the unit balanced).
    pub bounds: Vec<f64>,
    /// What was balanced (`records` | `bytes`), given with `--value-bytes` only.
    pub weight: Option<&'static str>,
}

fn mean(xs: impl ExactSizeIterator<Item = f64>) -> f64 {
    let n = xs.len();
    if n == 0 {
        0.0
    } else {
        xs.sum::<f64>() / n as f64
    }
}

fn max(xs: impl Iterator<Item = f64>) -> f64 {
    xs.fold(f64::NEG_INFINITY, f64::max)
}

impl Row {
    /// Mean lambda over seeds, in percent.
    pub fn lambda_mean_pct(&self) -> f64 {
        100.0 * mean(self.outcomes.iter().map(|o| o.lambda))
    }

    /// Worst (largest) lambda over seeds, in percent.
    pub fn lambda_worst_pct(&self) -> f64 {
        100.0 * max(self.outcomes.iter().map(|o| o.lambda))
    }

    /// Mean byte lambda over seeds, in percent (with `--value-bytes`).
    pub fn lambda_bytes_mean_pct(&self) -> Option<f64> {
        let bytes = self.lambda_bytes()?;
        Some(100.0 * mean(bytes.iter().copied()))
    }

    /// Worst byte lambda over seeds, in percent (with `--value-bytes`).
    pub fn lambda_bytes_worst_pct(&self) -> Option<f64> {
        let bytes = self.lambda_bytes()?;
        Some(100.0 * max(bytes.iter().copied()))
    }

    /// Per-seed byte lambdas (ratios), when every seed has one.
    fn lambda_bytes(&self) -> Option<Vec<f64>> {
        self.outcomes.iter().map(|o| o.lambda_bytes).collect()
    }

    /// The serialisable form (one JSON line).
    pub fn to_json(&self) -> JsonRow<'_> {
        let k = self.cell.k;
        let heavy: Vec<f64> = self
            .outcomes
            .iter()
            .filter_map(|o| o.heavy_hitters.map(|h| h as f64))
            .collect();
        JsonRow {
            algorithm: self.algorithm.name(),
            source: &self.cell.source,
            alpha: self.cell.alpha,
            k,
            n: self.cell.n,
            m: self.cell.m,
            theta: self.theta,
            mu: self.mu,
            seeds: self.outcomes.len(),
            learn_fraction: self.learn_fraction,
            lambda_mean_pct: self.lambda_mean_pct(),
            lambda_worst_pct: self.lambda_worst_pct(),
            lambda_pct: self.outcomes.iter().map(|o| 100.0 * o.lambda).collect(),
            weight: self.weight,
            lambda_bytes_mean_pct: self.lambda_bytes_mean_pct(),
            lambda_bytes_worst_pct: self.lambda_bytes_worst_pct(),
            lambda_bytes_pct: self
                .lambda_bytes()
                .map(|b| b.iter().map(|l| 100.0 * l).collect()),
            max_minus_mean_over_m_pct: 100.0
                * mean(self.outcomes.iter().map(|o| o.max_minus_mean_over_m(k))),
            max_minus_mean_over_m_worst_pct: 100.0
                * max(self.outcomes.iter().map(|o| o.max_minus_mean_over_m(k))),
            bound_pct: 100.0 * mean(self.bounds.iter().copied()),
            heavy_hitters: (!heavy.is_empty()).then(|| mean(heavy.iter().copied())),
            split_keys: self.split_keys_mean(),
            split_keys_at_most_fair: self
                .outcomes
                .iter()
                .filter_map(|o| o.split_at_most_fair)
                .max(),
        }
    }

    /// Mean over seeds of the keys whose records went to several partitions (`None` for key
    /// groupings).
    pub fn split_keys_mean(&self) -> Option<f64> {
        let split: Vec<f64> = self
            .outcomes
            .iter()
            .filter_map(|o| o.split_keys.map(|s| s as f64))
            .collect();
        (!split.is_empty()).then(|| mean(split.iter().copied()))
    }
}

/// One line of `--json` output.
#[derive(Debug, Serialize)]
pub struct JsonRow<'a> {
    /// Algorithm name.
    pub algorithm: &'static str,
    /// `zipf` or the trace path.
    pub source: &'a str,
    /// Zipf exponent, null for traces.
    pub alpha: Option<f64>,
    /// Partitions.
    pub k: u32,
    /// Distinct keys.
    pub n: usize,
    /// Records per stream.
    pub m: usize,
    /// Heavy-hitter threshold (DKG variants, else null).
    pub theta: Option<f64>,
    /// Buckets per partition (DKG variants, else null).
    pub mu: Option<f64>,
    /// Seeds (streams) averaged over.
    pub seeds: usize,
    /// Share of each stream learned on.
    pub learn_fraction: f64,
    /// Mean lambda over seeds, percent.
    pub lambda_mean_pct: f64,
    /// Largest lambda over seeds, percent.
    pub lambda_worst_pct: f64,
    /// Lambda of each seed, percent.
    pub lambda_pct: Vec<f64>,
    /// What the learning algorithms balanced, `records` or `bytes` (only with `--value-bytes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<&'static str>,
    /// Mean byte lambda over seeds, percent (only with `--value-bytes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lambda_bytes_mean_pct: Option<f64>,
    /// Largest byte lambda over seeds, percent (only with `--value-bytes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lambda_bytes_worst_pct: Option<f64>,
    /// Byte lambda of each seed, percent (only with `--value-bytes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lambda_bytes_pct: Option<Vec<f64>>,
    /// Mean of (max - mean) / m over seeds, percent (the PKG papers' metric; = lambda / k).
    pub max_minus_mean_over_m_pct: f64,
    /// Largest (max - mean) / m over seeds, percent.
    pub max_minus_mean_over_m_worst_pct: f64,
    /// Mean key-grouping lower bound max(1, k p1) - 1 over seeds, percent.
    pub bound_pct: f64,
    /// Mean number of heavy hitters in the assignment (DKG variants, else null).
    pub heavy_hitters: Option<f64>,
    /// Mean number of keys whose records went to several partitions (`dkg-split`, `pkg`; else null).
    pub split_keys: Option<f64>,
    /// Largest number over seeds of `dkg-split`'s split keys whose share of the stream is at most
    /// `1/k` (else null).
    pub split_keys_at_most_fair: Option<u64>,
}

/// Writes one JSON object per row.
pub fn write_json(out: &mut impl Write, rows: &[Row]) -> anyhow::Result<()> {
    for row in rows {
        serde_json::to_writer(&mut *out, &row.to_json())?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

fn format_alpha(alpha: Option<f64>) -> String {
    alpha.map_or_else(|| "-".to_string(), |a| format!("{a:?}"))
}

/// Writes the aligned table: one line per (source, alpha, k), one column per algorithm with
/// `lambda mean (worst)` in percent, then with `--value-bytes` one `<algorithm>:bytes` column per
/// algorithm with its byte lambda likewise, then one `<algorithm>:split` column per algorithm that
/// splits keys (`dkg-split`, `pkg`) with its mean count of split keys.
pub fn write_table(
    out: &mut impl Write,
    rows: &[Row],
    algorithms: &[Algorithm],
) -> anyhow::Result<()> {
    // The algorithms with a row that has `what`.
    let having = |what: fn(&Row) -> bool| -> Vec<Algorithm> {
        algorithms
            .iter()
            .copied()
            .filter(|a| rows.iter().any(|r| r.algorithm == *a && what(r)))
            .collect()
    };
    let splitting = having(|r| r.split_keys_mean().is_some());
    let sized = having(|r| r.lambda_bytes_mean_pct().is_some());
    let mut header = vec!["source".to_string(), "alpha".to_string(), "k".to_string()];
    header.extend(algorithms.iter().map(|a| a.name().to_string()));
    header.extend(sized.iter().map(|a| format!("{}:bytes", a.name())));
    header.extend(splitting.iter().map(|a| format!("{}:split", a.name())));
    let mut lines: Vec<Vec<String>> = vec![header];
    // Rows arrive grouped by cell, algorithms in `algorithms` order.
    for group in rows.chunk_by(|a, b| {
        a.cell.source == b.cell.source && a.cell.alpha == b.cell.alpha && a.cell.k == b.cell.k
    }) {
        let cell = &group[0].cell;
        let mut line = vec![
            cell.source.clone(),
            format_alpha(cell.alpha),
            cell.k.to_string(),
        ];
        for algorithm in algorithms {
            line.push(match group.iter().find(|r| r.algorithm == *algorithm) {
                Some(r) => format!("{:.1} ({:.1})", r.lambda_mean_pct(), r.lambda_worst_pct()),
                None => "-".to_string(),
            });
        }
        for algorithm in &sized {
            let row = group.iter().find(|r| r.algorithm == *algorithm);
            line.push(
                match row.and_then(|r| r.lambda_bytes_mean_pct().zip(r.lambda_bytes_worst_pct())) {
                    Some((mean, worst)) => format!("{mean:.1} ({worst:.1})"),
                    None => "-".to_string(),
                },
            );
        }
        for algorithm in &splitting {
            let split = group
                .iter()
                .find(|r| r.algorithm == *algorithm)
                .and_then(Row::split_keys_mean);
            line.push(split.map_or_else(|| "-".to_string(), |s| format!("{s:.1}")));
        }
        lines.push(line);
    }
    let columns = lines[0].len();
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for line in &lines {
        let mut text = String::new();
        for (c, field) in line.iter().enumerate() {
            if c > 0 {
                text.push_str("  ");
            }
            // Text columns left-aligned, numbers right-aligned.
            if c == 0 {
                text.push_str(&format!("{field:<w$}", w = widths[c]));
            } else {
                text.push_str(&format!("{field:>w$}", w = widths[c]));
            }
        }
        writeln!(out, "{}", text.trim_end())?;
    }
    Ok(())
}

/// A column an algorithm has only in some runs: its suffix, whether a row has it, its legend for
/// an algorithm's name.
type OptionalColumn = (&'static str, fn(&Row) -> bool, fn(&str) -> String);

/// Writes the legend of the table [`write_table`] writes for the same rows: one `#` line per column
/// after `k`, so a reader needs no documentation to read it.
pub fn write_legend(
    out: &mut impl Write,
    rows: &[Row],
    algorithms: &[Algorithm],
) -> anyhow::Result<()> {
    writeln!(
        out,
        "# columns: lambda percent, mean (worst) over seeds, of the placement each algorithm makes:"
    )?;
    let width = algorithms
        .iter()
        .map(|a| a.name().len() + ":bytes".len())
        .max()
        .unwrap_or(0);
    for a in algorithms {
        writeln!(out, "#   {:<width$}  {}", a.name(), a.explained())?;
    }
    // The columns an algorithm has only in some runs: `<name>:<suffix>`, legend line by line.
    let optional: [OptionalColumn; 2] = [
        (
            "bytes",
            |r| r.lambda_bytes_mean_pct().is_some(),
            |name| format!("{name}'s lambda over bytes (key + value sizes) instead of records"),
        ),
        (
            "split",
            |r| r.split_keys_mean().is_some(),
            |name| {
                format!(
                    "a COUNT, not a percentage: keys whose records {name} sent to several partitions (mean over seeds)"
                )
            },
        ),
    ];
    for (suffix, present, explained) in optional {
        for a in algorithms {
            if rows.iter().any(|r| r.algorithm == *a && present(r)) {
                let column = format!("{}:{suffix}", a.name());
                writeln!(out, "#   {column:<width$}  {}", explained(a.name()))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn row(algorithm: Algorithm, k: u32, lambdas: &[f64]) -> Row {
        let dkg = matches!(algorithm, Algorithm::Dkg | Algorithm::DkgPaper);
        Row {
            cell: Cell {
                source: "zipf".into(),
                alpha: Some(1.0),
                k,
                n: 100,
                m: 1000,
            },
            algorithm,
            theta: dkg.then_some(0.01),
            mu: dkg.then_some(64.0),
            learn_fraction: 0.1,
            outcomes: lambdas
                .iter()
                .map(|&lambda| Outcome {
                    lambda,
                    lambda_bytes: None,
                    heavy_hitters: dkg.then_some(3),
                    split_keys: (algorithm == Algorithm::Pkg).then_some(40),
                    split_at_most_fair: None,
                })
                .collect(),
            bounds: vec![0.02; lambdas.len()],
            weight: None,
        }
    }

    #[test]
    fn mean_and_worst_over_seeds() {
        let r = row(Algorithm::Hash, 10, &[0.1, 0.3, 0.2]);
        assert!((r.lambda_mean_pct() - 20.0).abs() < 1e-9);
        assert!((r.lambda_worst_pct() - 30.0).abs() < 1e-9);
        let j = r.to_json();
        assert!((j.max_minus_mean_over_m_pct - 2.0).abs() < 1e-9);
        assert!((j.max_minus_mean_over_m_worst_pct - 3.0).abs() < 1e-9);
        assert!((j.bound_pct - 2.0).abs() < 1e-9);
        assert_eq!(j.heavy_hitters, None);
        assert_eq!(
            row(Algorithm::Dkg, 10, &[0.0]).to_json().heavy_hitters,
            Some(3.0)
        );
    }

    #[test]
    fn json_lines_have_the_documented_fields() {
        let rows = [
            row(Algorithm::Dkg, 10, &[0.1]),
            row(Algorithm::Hash, 10, &[0.5]),
        ];
        let mut out = Vec::new();
        write_json(&mut out, &rows).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        for field in [
            "algorithm",
            "source",
            "alpha",
            "k",
            "n",
            "m",
            "theta",
            "mu",
            "seeds",
            "lambda_mean_pct",
            "lambda_worst_pct",
            "heavy_hitters",
            "max_minus_mean_over_m_pct",
            "bound_pct",
        ] {
            assert!(lines[0].get(field).is_some(), "missing {field}");
        }
        assert_eq!(lines[0]["algorithm"], "dkg");
        assert_eq!(lines[1]["theta"], serde_json::Value::Null);
    }

    #[test]
    fn legend_explains_every_column_of_the_table() {
        let rows = vec![
            row(Algorithm::Hash, 10, &[0.5]),
            row(Algorithm::Pkg, 10, &[0.01]),
            row(Algorithm::Bound, 10, &[0.1]),
        ];
        let algorithms = [Algorithm::Hash, Algorithm::Pkg, Algorithm::Bound];
        let mut table = Vec::new();
        write_table(&mut table, &rows, &algorithms).unwrap();
        let mut legend = Vec::new();
        write_legend(&mut legend, &rows, &algorithms).unwrap();
        let legend = String::from_utf8(legend).unwrap();
        let table = String::from_utf8(table).unwrap();
        let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
        assert!(header.contains(&"pkg:split"), "{table}");
        for column in &header[3..] {
            assert!(
                legend
                    .lines()
                    .any(|l| l.trim_start_matches('#').split_whitespace().next() == Some(column)),
                "{column} is not explained:\n{legend}"
            );
        }
    }

    #[test]
    fn table_is_aligned() {
        let rows = [
            row(Algorithm::Hash, 5, &[0.123]),
            row(Algorithm::Dkg, 5, &[0.01]),
            row(Algorithm::Hash, 100, &[12.5]),
            row(Algorithm::Dkg, 100, &[0.2]),
        ];
        let mut out = Vec::new();
        write_table(&mut out, &rows, &[Algorithm::Hash, Algorithm::Dkg]).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains(":split"), "no splitting algorithm: {text}");
        let mut with_pkg = rows.to_vec();
        with_pkg.insert(2, row(Algorithm::Pkg, 5, &[0.0]));
        let mut out = Vec::new();
        write_table(
            &mut out,
            &with_pkg,
            &[Algorithm::Hash, Algorithm::Dkg, Algorithm::Pkg],
        )
        .unwrap();
        let with = String::from_utf8(out).unwrap();
        let first: Vec<&str> = with.lines().collect();
        assert!(first[0].ends_with("pkg:split"), "{with}");
        assert!(first[1].ends_with("40.0"), "{with}");
        assert!(first[2].ends_with('-'), "{with}");
        let mut out = Vec::new();
        write_table(&mut out, &rows, &[Algorithm::Hash, Algorithm::Dkg]).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].starts_with("source"));
        assert!(
            lines[1].contains("12.3 (12.3)") && lines[1].contains("1.0 (1.0)"),
            "{text}"
        );
        assert!(lines[2].contains("1250.0 (1250.0)"), "{text}");
        // Right-aligned numeric columns end at the same offset.
        assert!(lines.iter().all(|l| l.len() == lines[0].len()), "{text}");
    }
}
