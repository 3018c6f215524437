//! Pure helpers: percentiles, the result table, per-host ratios.

use serde::Serialize;

/// Latency summary of a set of samples, in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    pub samples: usize,
    pub min_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
}

/// The `p`-th percentile (0..=100) by the nearest-rank method; `None` when empty.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let p = p.clamp(0.0, 100.0);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

pub fn summarize(samples_ms: &[f64]) -> Summary {
    let mut v: Vec<f64> = samples_ms
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .collect();
    if v.is_empty() {
        return Summary::default();
    }
    v.sort_by(f64::total_cmp);
    let at = |p| percentile(&v, p).unwrap_or(0.0);
    Summary {
        samples: v.len(),
        min_ms: v[0],
        p50_ms: at(50.0),
        p90_ms: at(90.0),
        p99_ms: at(99.0),
        max_ms: v[v.len() - 1],
        mean_ms: v.iter().sum::<f64>() / v.len() as f64,
    }
}

/// `a / b`, or 0 when `b` is 0.
pub fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 { 0.0 } else { a / b }
}

/// One row of the final table: a metric, its value and unit, and an optional comparison
/// (a target, a ratio to the emulator-only limit, or the other side's figure).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub metric: String,
    pub value: String,
    pub note: String,
}

impl Row {
    pub fn new(
        metric: impl Into<String>,
        value: impl Into<String>,
        note: impl Into<String>,
    ) -> Row {
        Row {
            metric: metric.into(),
            value: value.into(),
            note: note.into(),
        }
    }
}

/// Renders rows as an aligned plain-text table with a header.
pub fn table(rows: &[Row]) -> String {
    let headers = ["METRIC", "VALUE", "NOTE"];
    let width = |f: fn(&Row) -> &str, h: &str| {
        rows.iter()
            .map(|r| f(r).chars().count())
            .chain([h.chars().count()])
            .max()
            .unwrap_or(0)
    };
    let w0 = width(|r| &r.metric, headers[0]);
    let w1 = width(|r| &r.value, headers[1]);
    let mut out = String::new();
    let mut line = |a: &str, b: &str, c: &str| {
        let l = format!("{a:<w0$}  {b:>w1$}  {c}");
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(headers[0], headers[1], headers[2]);
    for r in rows {
        line(&r.metric, &r.value, &r.note);
    }
    out
}

/// Formats seconds with one decimal, or milliseconds below one second.
pub fn secs(s: f64) -> String {
    if s < 1.0 {
        format!("{:.0} ms", s * 1000.0)
    } else {
        format!("{s:.1} s")
    }
}

pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&v, 100.0), Some(100.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
        let s = summarize(&[3.0, 1.0, 2.0, f64::NAN]);
        assert_eq!(
            (s.samples, s.min_ms, s.p50_ms, s.max_ms),
            (3, 1.0, 2.0, 3.0)
        );
        assert_eq!(s.mean_ms, 2.0);
        assert_eq!(summarize(&[]), Summary::default());
    }

    #[test]
    fn table_is_aligned() {
        let t = table(&[
            Row::new("wall time", "1.5 s", "target < 10 s"),
            Row::new("rss", "12.0 MiB", ""),
        ]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "METRIC        VALUE  NOTE");
        assert_eq!(lines[1], "wall time     1.5 s  target < 10 s");
        assert_eq!(lines[2], "rss        12.0 MiB");
    }

    #[test]
    fn units() {
        assert_eq!(secs(0.25), "250 ms");
        assert_eq!(secs(12.34), "12.3 s");
        assert_eq!(mib(3 * 1024 * 1024 / 2), "1.5 MiB");
        assert_eq!(ratio(1.0, 0.0), 0.0);
        assert_eq!(ratio(3.0, 2.0), 1.5);
    }
}
