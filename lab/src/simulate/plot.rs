//! `--plot`: lambda (mean over seeds) against alpha, one panel per k, one line per algorithm.
//!
//! The y axis is logarithmic because lambda spans four orders of magnitude over the grid (a few
//! percent for mild skew, thousands of percent when one key holds most of the stream and k is large);
//! values below the axis floor are drawn at the floor. Text uses DejaVu Sans, compiled into the binary
//! (assets/fonts, Bitstream Vera license) so no system font library is needed.

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{Context, anyhow};
use plotters::prelude::*;
use plotters::style::FontStyle;

use super::algorithms::Algorithm;
use super::report::Row;

const FONT: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");
pub(crate) const FAMILY: &str = "sans-serif";
/// Smallest lambda (percent) the log axis shows.
const FLOOR_PCT: f64 = 0.1;
const PANEL_WIDTH: u32 = 560;
const PANEL_HEIGHT: u32 = 420;
const TITLE_HEIGHT: u32 = 50;

pub(crate) fn register_font() -> anyhow::Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED
        .get_or_init(|| plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_ok());
    ok.then_some(())
        .ok_or_else(|| anyhow!("the bundled font could not be loaded"))
}

fn style(algorithm: Algorithm) -> (RGBColor, bool) {
    // (colour, dashed)
    match algorithm {
        Algorithm::Hash => (RGBColor(214, 39, 40), false),
        Algorithm::DkgPaper => (RGBColor(255, 127, 14), false),
        Algorithm::Dkg => (RGBColor(31, 119, 180), false),
        Algorithm::DkgSplit => (RGBColor(227, 119, 194), false),
        Algorithm::LptLearn => (RGBColor(23, 190, 207), true),
        Algorithm::LptFull => (RGBColor(44, 160, 44), false),
        Algorithm::Bound => (RGBColor(0, 0, 0), true),
        Algorithm::Pkg => (RGBColor(148, 103, 189), true),
    }
}

/// Draws the chart of `rows` (Zipf rows only) to a PNG at `path`. `subtitle` describes the run.
pub fn draw(
    path: &Path,
    rows: &[Row],
    algorithms: &[Algorithm],
    subtitle: &str,
) -> anyhow::Result<()> {
    register_font()?;
    let mut ks: Vec<u32> = rows.iter().map(|r| r.cell.k).collect();
    ks.dedup();
    let mut seen = std::collections::HashSet::new();
    ks.retain(|k| seen.insert(*k));
    anyhow::ensure!(
        !ks.is_empty() && rows.iter().all(|r| r.cell.alpha.is_some()),
        "nothing to plot"
    );

    let alphas = rows.iter().filter_map(|r| r.cell.alpha);
    let (lo, hi) = alphas.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), a| {
        (lo.min(a), hi.max(a))
    });
    let pad = ((hi - lo) * 0.05).max(0.1);
    let x_range = (lo - pad)..(hi + pad);
    let y_top = rows
        .iter()
        .map(Row::lambda_mean_pct)
        .fold(FLOOR_PCT * 10.0, f64::max)
        * 2.0;
    // Slightly below the floor so that the floor's own tick (0.1) is labelled.
    let y_range = FLOOR_PCT * 0.8..y_top;

    // One extra cell holds the legend.
    let cells = ks.len() + 1;
    let cols = cells.min(3);
    let rows_n = cells.div_ceil(cols);
    let size = (
        PANEL_WIDTH * cols as u32,
        TITLE_HEIGHT + PANEL_HEIGHT * rows_n as u32,
    );
    let root = BitMapBackend::new(path, size).into_drawing_area();
    let err = |e: DrawingAreaErrorKind<_>| anyhow!("drawing {}: {e}", path.display());
    root.fill(&WHITE).map_err(err)?;
    let body = root
        .titled(
            "Load imbalance λ (mean over seeds, log scale) vs Zipf α",
            (FAMILY, 26),
        )
        .map_err(err)?;
    let panels = body.split_evenly((rows_n, cols));
    for (panel, &k) in panels.iter().zip(&ks) {
        let ranges = (x_range.clone(), y_range.clone());
        draw_panel(panel, k, rows, algorithms, ranges)
            .with_context(|| format!("drawing {}", path.display()))?;
    }
    let legend = panels.get(ks.len()).context("legend panel")?;
    draw_legend(legend, algorithms, subtitle)
        .with_context(|| format!("drawing {}", path.display()))?;
    root.present().map_err(err)?;
    Ok(())
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;
/// The x range and the (logarithmic) y range of every panel.
type Ranges = (std::ops::Range<f64>, std::ops::Range<f64>);

fn plot_error<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> anyhow::Error {
    anyhow!("{e}")
}

/// One panel: lambda against alpha for partition count `k`, one line per algorithm.
fn draw_panel(
    panel: &Area<'_>,
    k: u32,
    rows: &[Row],
    algorithms: &[Algorithm],
    (x_range, y_range): Ranges,
) -> anyhow::Result<()> {
    let mut chart = ChartBuilder::on(panel)
        .caption(format!("k = {k} partitions"), (FAMILY, 20))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(x_range, y_range.log_scale())
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_desc("Zipf α")
        .y_desc("λ mean (%)")
        .x_label_formatter(&|x| format!("{x:.1}"))
        .y_label_formatter(&|y| {
            if *y >= 1.0 {
                format!("{y:.0}")
            } else {
                format!("{y}")
            }
        })
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 15))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(plot_error)?;
    for &algorithm in algorithms {
        let points: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.cell.k == k && r.algorithm == algorithm)
            .filter_map(|r| {
                r.cell
                    .alpha
                    .map(|a| (a, r.lambda_mean_pct().max(FLOOR_PCT)))
            })
            .collect();
        let (colour, dashed) = style(algorithm);
        let line = colour.stroke_width(2);
        if dashed {
            chart
                .draw_series(DashedLineSeries::new(points.iter().copied(), 8, 5, line))
                .map_err(plot_error)?;
        } else {
            chart
                .draw_series(LineSeries::new(points.iter().copied(), line))
                .map_err(plot_error)?;
        }
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 3, colour.filled())))
            .map_err(plot_error)?;
    }
    Ok(())
}

/// The legend cell: one sample line per algorithm, then the run's notes.
fn draw_legend(legend: &Area<'_>, algorithms: &[Algorithm], subtitle: &str) -> anyhow::Result<()> {
    let mut y = 40;
    for &algorithm in algorithms {
        let (colour, dashed) = style(algorithm);
        let line = colour.stroke_width(3);
        let (x0, x1) = (60, 120);
        if dashed {
            for x in (x0..x1).step_by(14) {
                legend
                    .draw(&PathElement::new(vec![(x, y), ((x + 8).min(x1), y)], line))
                    .map_err(plot_error)?;
            }
        } else {
            legend
                .draw(&PathElement::new(vec![(x0, y), (x1, y)], line))
                .map_err(plot_error)?;
        }
        legend
            .draw(&Circle::new((90, y), 4, colour.filled()))
            .map_err(plot_error)?;
        legend
            .draw(&Text::new(
                algorithm.name(),
                (135, y - 10),
                (FAMILY, 20).into_font(),
            ))
            .map_err(plot_error)?;
        y += 30;
    }
    let notes = subtitle
        .lines()
        .chain(std::iter::once("values below 0.1% are drawn at 0.1%"));
    for line in notes.flat_map(|l| wrap(l, 60)) {
        legend
            .draw(&Text::new(line, (60, y), (FAMILY, 15).into_font()))
            .map_err(plot_error)?;
        y += 22;
    }
    Ok(())
}

/// Splits `text` after ", " so that lines stay within `width` characters where possible; continuation
/// lines are indented.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut current = String::new();
    for (i, piece) in text.split_inclusive(", ").enumerate() {
        if i > 0 && current.chars().count() + piece.trim_end().chars().count() > width {
            lines.push(current.trim_end().to_string());
            current = "    ".to_string();
        }
        current.push_str(piece);
    }
    lines.push(current.trim_end().to_string());
    lines
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn wrap_splits_after_commas() {
        assert_eq!(wrap("short", 60), vec!["short"]);
        assert_eq!(wrap("a, b, c", 4), vec!["a,", "    b,", "    c"]);
        assert_eq!(wrap("aaaa, bb", 8), vec!["aaaa, bb"]);
        let long = "dkg: theta default_theta(k): k=5: 0.05, k=10: 0.025, k=20: 0.0125, k=50: 0.005";
        assert!(wrap(long, 60).iter().all(|l| l.chars().count() <= 60));
    }
}
