//! The Prometheus text exposition format (version 0.0.4), written by hand:
//! `# HELP` and `# TYPE` once per family, then its samples, every sample
//! carrying the broker's common labels first.

use std::fmt::Write;

use basalt_common::histogram::HistogramSnapshot;

/// The media type of [`Exposition`]'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A metric family's type.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Text being written. Invariant: families are written whole, one after
/// the other, and no family name is written twice.
#[derive(Debug)]
pub struct Exposition {
    out: String,
    /// `k="v",...` of the labels every sample carries.
    common: String,
}

/// Escapes a label value (backslash, double quote, line feed).
fn escape(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn push_labels(out: &mut String, labels: &[(&str, &str)]) {
    for (i, (k, v)) in labels.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(k);
        out.push_str("=\"");
        escape(v, out);
        out.push('"');
    }
}

/// A sample value: integers as such, other numbers in Rust's shortest
/// round-tripping form, infinities and NaN as Prometheus spells them.
pub fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

impl Exposition {
    /// Output whose samples all carry `common` labels.
    pub fn new(common: &[(&str, &str)]) -> Self {
        let mut c = String::new();
        push_labels(&mut c, common);
        Exposition {
            out: String::with_capacity(16 * 1024),
            common: c,
        }
    }

    /// Starts a family.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let kind = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        };
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    /// One sample of the current family.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        if !self.common.is_empty() || !labels.is_empty() {
            self.out.push('{');
            self.out.push_str(&self.common);
            if !labels.is_empty() {
                if !self.common.is_empty() {
                    self.out.push(',');
                }
                push_labels(&mut self.out, labels);
            }
            self.out.push('}');
        }
        self.out.push(' ');
        self.out.push_str(&format_value(value));
        self.out.push('\n');
    }

    /// One histogram's `_bucket`, `_sum` and `_count` samples; bounds and
    /// sum are multiplied by `scale` (microseconds to milliseconds: 0.001).
    pub fn histogram(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        h: &HistogramSnapshot,
        scale: f64,
    ) {
        let bucket = format!("{name}_bucket");
        let les: Vec<String> = h
            .bounds
            .iter()
            .map(|b| format_value(*b as f64 * scale))
            .chain(std::iter::once("+Inf".to_string()))
            .collect();
        let counts = h.cumulative.iter().copied().chain(std::iter::once(h.count));
        for (le, count) in les.iter().zip(counts) {
            let mut l: Vec<(&str, &str)> = labels.to_vec();
            l.push(("le", le));
            self.sample(&bucket, &l, count as f64);
        }
        self.sample(&format!("{name}_sum"), labels, h.sum as f64 * scale);
        self.sample(&format!("{name}_count"), labels, h.count as f64);
    }

    /// The text written.
    pub fn finish(self) -> String {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_common::histogram::AtomicHistogram;

    #[test]
    fn samples_carry_common_labels_and_escape_values() {
        let mut e = Exposition::new(&[("cluster", "c1")]);
        e.family("m_total", Kind::Counter, "Things.");
        e.sample("m_total", &[("topic", "a\"b\\c\nd")], 3.0);
        e.family("g", Kind::Gauge, "A ratio.");
        e.sample("g", &[], 0.25);
        let t = e.finish();
        assert_eq!(
            t,
            "# HELP m_total Things.\n# TYPE m_total counter\n\
             m_total{cluster=\"c1\",topic=\"a\\\"b\\\\c\\nd\"} 3\n\
             # HELP g A ratio.\n# TYPE g gauge\ng{cluster=\"c1\"} 0.25\n"
        );
    }

    #[test]
    fn histograms_are_cumulative_with_an_infinite_bucket() {
        let h = AtomicHistogram::new(&[500, 2000]);
        h.record(100);
        h.record(1500);
        h.record(9000);
        let mut e = Exposition::new(&[]);
        e.family("lat", Kind::Histogram, "Latency.");
        e.histogram("lat", &[("code", "10")], &h.snapshot(), 0.001);
        let t = e.finish();
        assert!(t.contains("lat_bucket{code=\"10\",le=\"0.5\"} 1\n"), "{t}");
        assert!(t.contains("lat_bucket{code=\"10\",le=\"2\"} 2\n"), "{t}");
        assert!(t.contains("lat_bucket{code=\"10\",le=\"+Inf\"} 3\n"), "{t}");
        assert!(t.contains("lat_sum{code=\"10\"} 10.6\n"), "{t}");
        assert!(t.contains("lat_count{code=\"10\"} 3\n"), "{t}");
        assert_eq!(format_value(f64::INFINITY), "+Inf");
    }
}
