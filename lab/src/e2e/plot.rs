//! The PNG: end-to-end latency (p50 and p99, log scale) against the offered rate, every step of both
//! groups, with each group's capacity as a vertical line. Text uses the font bundled for `simulate`.

use std::path::Path;

use anyhow::anyhow;
use plotters::prelude::*;

use super::report::{BenchResult, SideResult};
use crate::simulate::plot::{FAMILY, register_font};

const HASH: RGBColor = RGBColor(214, 39, 40);
const DKG: RGBColor = RGBColor(31, 119, 180);

/// Latency points of `side`: (offered rate, ms), sorted by rate; ms floored at 1 for the log axis.
fn points(side: &SideResult, p99: bool) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = side
        .steps
        .iter()
        .filter(|s| s.latency_ms.count > 0)
        .map(|s| {
            let ms = if p99 {
                s.latency_ms.p99
            } else {
                s.latency_ms.p50
            };
            (s.offered_rps, f64::from(ms).max(1.0))
        })
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

pub fn draw(path: &Path, r: &BenchResult) -> anyhow::Result<()> {
    register_font()?;
    let err = |e: DrawingAreaErrorKind<_>| anyhow!("drawing {}: {e}", path.display());
    let root = BitMapBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let all: Vec<(f64, f64)> = [&r.hash, &r.dkg]
        .iter()
        .flat_map(|s| points(s, true))
        .collect();
    let x_max = all.iter().map(|p| p.0).fold(1.0, f64::max) * 1.05;
    let y_max = all.iter().map(|p| p.1).fold(10.0, f64::max) * 2.0;
    let y_min = [&r.hash, &r.dkg]
        .iter()
        .flat_map(|s| points(s, false))
        .map(|p| p.1)
        .fold(y_max / 4.0, f64::min)
        / 1.5;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "End-to-end latency vs offered rate: Zipf {}, {} partitions, {:.0} rec/s per member",
                r.zipf, r.partitions, r.member_capacity_rps
            ),
            (FAMILY, 20),
        )
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..x_max, (y_min..y_max).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("offered rate (records/s)")
        .y_desc("latency (ms, log)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 15))
        .draw()
        .map_err(err)?;
    for (side, colour, label) in [(&r.hash, HASH, "hash"), (&r.dkg, DKG, "DKG")] {
        for p99 in [true, false] {
            let pts = points(side, p99);
            let name = format!("{label} p{}", if p99 { 99 } else { 50 });
            let style = colour.stroke_width(if p99 { 2 } else { 1 });
            let series = if p99 {
                chart.draw_series(LineSeries::new(pts.iter().copied(), style))
            } else {
                chart.draw_series(DashedLineSeries::new(pts.iter().copied(), 6, 4, style))
            };
            series
                .map_err(err)?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 3, colour.filled())))
                .map_err(err)?;
        }
        let cap = side.capacity_rps;
        chart
            .draw_series(DashedLineSeries::new(
                [(cap, y_min), (cap, y_max)],
                3,
                3,
                colour.mix(0.5).stroke_width(1),
            ))
            .map_err(err)?
            .label(format!("{label} capacity {cap:.0} rec/s"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], colour.mix(0.5)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FAMILY, 14))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}
