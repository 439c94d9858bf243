//! The demo's live screen: both topics' partitions as bars, side by side, with ANSI colours on a terminal.

use std::fmt::Write as _;
use std::process::Command;
use std::time::Duration;

use super::scrape::View;
use super::{Args, Side};

const GREEN: &str = "\x1b[32m";
const RED: &str = "\x1b[31m";
const YELLOW: &str = "\x1b[33m";
const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";

/// Terminal width: COLUMNS, else `stty size` on the controlling terminal, else 100.
pub(super) fn terminal_width() -> usize {
    if let Some(c) = std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()) {
        return c;
    }
    std::fs::File::open("/dev/tty")
        .ok()
        .and_then(|tty| Command::new("stty").arg("size").stdin(tty).output().ok())
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
        })
        .unwrap_or(100)
}

/// A horizontal bar of `width` cells for `frac` in [0, 1], with eighth-block resolution.
fn bar(frac: f64, width: usize) -> String {
    const PARTS: [char; 8] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];
    let eighths = (frac.clamp(0.0, 1.0) * width as f64 * 8.0).round() as usize;
    let mut s = "█".repeat(eighths / 8);
    if !eighths.is_multiple_of(8) {
        s.push(PARTS[eighths % 8]);
    }
    let len = s.chars().count();
    s.push_str(&" ".repeat(width.saturating_sub(len)));
    s
}

/// Width of the "p11  " column and of the gap between the two sides.
const PREFIX: usize = 5;
const GAP: usize = 3;

/// `text` padded or cut to exactly `w` characters.
fn fit(text: &str, w: usize) -> String {
    let n = text.chars().count();
    if n >= w {
        text.chars().take(w).collect()
    } else {
        format!("{text}{}", " ".repeat(w - n))
    }
}

/// One frame's settings.
pub(super) struct Screen<'a> {
    pub(super) args: &'a Args,
    pub(super) color: bool,
    pub(super) width: usize,
}

impl Screen<'_> {
    fn paint(&self, c: &str, text: &str) -> String {
        if self.color {
            format!("{c}{text}{RESET}")
        } else {
            text.to_string()
        }
    }

    /// One frame: the title, a row per partition with both topics' bars, the imbalances and hot keys.
    pub(super) fn render(
        &self,
        t: Duration,
        hash: (&Side, &View),
        dkg: (&Side, &View),
        note: &str,
    ) -> String {
        // "p11  " + column + gap + column, within the terminal width.
        let col = (self.width.saturating_sub(PREFIX + GAP + 1) / 2).clamp(30, 80);
        let mut s = self.title(t);
        s.push_str(&self.partition_rows(hash, dkg, col));
        s.push_str(&self.footer(hash.1, dkg.1, col));
        if !note.is_empty() {
            let _ = writeln!(s);
            let _ = writeln!(s, "{}", self.paint(DIM, note));
        }
        s
    }

    fn title(&self, t: Duration) -> String {
        let k = self.args.partitions;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{}",
            self.paint(
                BOLD,
                &format!(
                    "DKG demo: {k} partitions, Zipf({}) over {} keys, {} records/s per topic",
                    self.args.alpha, self.args.keys, self.args.rate
                )
            )
        );
        let _ = writeln!(
            s,
            "t = {:>3.0}/{} s   share of records per partition, samplers' window   {} = 1/{k}",
            t.as_secs_f64(),
            self.args.duration_secs,
            self.paint(DIM, "|")
        );
        let _ = writeln!(s);
        s
    }

    /// The column heads and one row per partition: both topics' shares as bars on one scale.
    fn partition_rows(&self, hash: (&Side, &View), dkg: (&Side, &View), col: usize) -> String {
        let k = self.args.partitions;
        let fair = 1.0 / f64::from(k);
        // Both sides on one scale: the largest share on screen fills the bar.
        let top = hash
            .1
            .share
            .values()
            .chain(dkg.1.share.values())
            .copied()
            .fold(fair * 1.5, f64::max);
        let bar_w = col - 7;
        let gap = " ".repeat(GAP);
        let mut s = String::new();
        let head = |side: &Side, v: &View| -> String {
            if side.label == "DKG" {
                if v.epoch == 0 {
                    "DKG (learning: hashed until epoch 1)".to_string()
                } else {
                    let plural = if v.publishes == 1 { "" } else { "es" };
                    format!("DKG (epoch {}, {} publish{plural})", v.epoch, v.publishes)
                }
            } else {
                "Kafka's default partitioner (hash)".to_string()
            }
        };
        let _ = writeln!(
            s,
            "{}{}{gap}{}",
            " ".repeat(PREFIX),
            self.paint(BOLD, &fit(&head(hash.0, hash.1), col)),
            self.paint(BOLD, &fit(&head(dkg.0, dkg.1), col))
        );
        let fair_cell = ((fair / top) * bar_w as f64).round() as usize;
        for p in 0..k {
            let mut cells = Vec::new();
            for v in [hash.1, dkg.1] {
                let share = v.share.get(&p).copied();
                let mut b: Vec<char> = bar(share.unwrap_or(0.0) / top, bar_w).chars().collect();
                if fair_cell < b.len() && b[fair_cell] == ' ' {
                    b[fair_cell] = '|';
                }
                let b: String = b.into_iter().collect();
                let colour = match share {
                    Some(x) if x > fair * 1.5 => RED,
                    Some(x) if x > fair * 1.15 => YELLOW,
                    _ => GREEN,
                };
                let value = share.map_or("     -".to_string(), |x| format!("{:>5.1}%", x * 100.0));
                cells.push(format!("{} {value}", self.paint(colour, &b)));
            }
            let _ = writeln!(
                s,
                "{}{}{gap}{}",
                fit(&format!("p{p}"), PREFIX),
                cells[0],
                cells[1]
            );
        }
        let _ = writeln!(s);
        s
    }

    /// Both imbalances, the key-grouping bound, the heavy hitters and the hottest keys.
    fn footer(&self, hash: &View, dkg: &View, col: usize) -> String {
        let gap = " ".repeat(GAP);
        let mut s = String::new();
        let imb = |v: &View| -> String {
            let colour = match v.observed {
                Some(x) if x > 0.5 => RED,
                Some(x) if x > 0.15 => YELLOW,
                Some(_) => GREEN,
                None => DIM,
            };
            self.paint(colour, &fit(&format!("imbalance {}", pct(v.observed)), col))
        };
        let _ = writeln!(s, "{}{}{gap}{}", " ".repeat(PREFIX), imb(hash), imb(dkg));
        let _ = writeln!(
            s,
            "{}key-grouping lower bound max(1, k*p1) - 1 = {}; heavy hitters: {}",
            " ".repeat(PREFIX),
            pct(dkg.bound.or(hash.bound)),
            dkg.heavy_hitters
                .map_or("n/a".into(), |h| format!("{h:.0}"))
        );
        let keys: Vec<String> = dkg
            .top_keys
            .iter()
            .take(5)
            .map(|(_, key, share)| format!("{key} {:.1}%", share * 100.0))
            .collect();
        if !keys.is_empty() {
            let _ = writeln!(s, "{}hottest keys: {}", " ".repeat(PREFIX), keys.join(", "));
        }
        s
    }
}

/// A share as a percentage with one decimal, or `n/a`: the screen's and the summary's format.
pub(super) fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_string(), |v| format!("{:.1}%", v * 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_have_the_requested_width() {
        for frac in [0.0, 0.01, 0.5, 0.999, 1.0, 2.0] {
            assert_eq!(bar(frac, 20).chars().count(), 20, "{frac}");
        }
        assert_eq!(bar(1.0, 4), "████");
        assert_eq!(bar(0.5, 4), "██  ");
    }
}
