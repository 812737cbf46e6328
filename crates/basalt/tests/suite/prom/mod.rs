//! A strict parser of the Prometheus text exposition format (0.0.4) for
//! tests: every sample must belong to a family declared by `# TYPE` before
//! it, names and labels must be well-formed, no series may repeat, and a
//! histogram's buckets must be cumulative and end in `+Inf` equal to its
//! `_count`. Also a minimal HTTP GET over a TcpStream.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// A parsed exposition.
#[derive(Debug, Default)]
pub struct Exposition {
    pub types: HashMap<String, String>,
    pub samples: Vec<Sample>,
}

impl Exposition {
    /// The value of the one sample named `name` whose labels include
    /// `labels`; panics when there is not exactly one.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let found: Vec<&Sample> = self.find(name, labels);
        assert_eq!(
            found.len(),
            1,
            "{name}{labels:?}: {} samples match",
            found.len()
        );
        found[0].value
    }

    /// Like [`Self::value`], `None` when no sample matches.
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let found = self.find(name, labels);
        assert!(found.len() <= 1, "{name}{labels:?}: several samples match");
        found.first().map(|s| s.value)
    }

    pub fn find(&self, name: &str, labels: &[(&str, &str)]) -> Vec<&Sample> {
        self.samples
            .iter()
            .filter(|s| {
                s.name == name
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .collect()
    }
}

fn valid_name(n: &str) -> bool {
    let mut c = n.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_' || ch == ':')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == ':')
}

fn parse_value(v: &str) -> Result<f64, String> {
    match v {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => v.parse().map_err(|_| format!("bad value {v:?}")),
    }
}

/// Parses `{k="v",...}` starting after `{`; returns labels and the rest.
fn parse_labels(s: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut labels = BTreeMap::new();
    let mut rest = s;
    loop {
        if let Some(r) = rest.strip_prefix('}') {
            return Ok((labels, r));
        }
        let eq = rest.find('=').ok_or("label without =")?;
        let key = &rest[..eq];
        if !valid_name(key) || key.starts_with("__") {
            return Err(format!("bad label name {key:?}"));
        }
        rest = rest[eq + 1..]
            .strip_prefix('"')
            .ok_or("label value not quoted")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    other => return Err(format!("bad escape {other:?}")),
                },
                Some((i, '"')) => break i,
                Some((_, '\n')) | None => return Err("unterminated label value".into()),
                Some((_, c)) => value.push(c),
            }
        };
        if labels.insert(key.to_string(), value).is_some() {
            return Err(format!("label {key} repeated"));
        }
        rest = &rest[end + 1..];
        if let Some(r) = rest.strip_prefix(',') {
            rest = r;
        } else if !rest.starts_with('}') {
            return Err("expected , or } after a label".into());
        }
    }
}

/// The family a sample name belongs to, given the declared types.
fn family_of<'a>(name: &'a str, types: &HashMap<String, String>) -> Option<&'a str> {
    if types.contains_key(name) {
        return Some(name);
    }
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix)
            && types.get(base).map(String::as_str) == Some("histogram")
        {
            return Some(base);
        }
    }
    None
}

fn parse_comment(
    line: &str,
    n: usize,
    e: &mut Exposition,
    seen_samples: &HashSet<String>,
) -> Result<(), String> {
    let mut parts = line.splitn(4, ' ');
    let (_, kind, name) = (parts.next(), parts.next(), parts.next());
    let rest = parts.next().unwrap_or("");
    match (kind, name) {
        (Some("TYPE"), Some(name)) => {
            if !valid_name(name) {
                return Err(format!("line {n}: bad metric name {name:?}"));
            }
            if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&rest) {
                return Err(format!("line {n}: bad type {rest:?}"));
            }
            if seen_samples.contains(name) || e.types.insert(name.into(), rest.into()).is_some() {
                return Err(format!(
                    "line {n}: TYPE of {name} after its samples or twice"
                ));
            }
        }
        (Some("HELP"), Some(name)) if valid_name(name) => {}
        (Some("HELP"), _) => return Err(format!("line {n}: bad HELP")),
        _ => {}
    }
    Ok(())
}

/// Parses `text` strictly; the error names the line.
pub fn parse(text: &str) -> Result<Exposition, String> {
    let mut e = Exposition::default();
    let mut series = HashSet::new();
    let mut families_seen = HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.is_empty() {
            continue;
        }
        if line.starts_with('#') {
            parse_comment(line, n, &mut e, &families_seen)?;
            continue;
        }
        let name_end = line.find(['{', ' ']).ok_or(format!("line {n}: no value"))?;
        let name = &line[..name_end];
        if !valid_name(name) {
            return Err(format!("line {n}: bad metric name {name:?}"));
        }
        let (labels, rest) = if line[name_end..].starts_with('{') {
            parse_labels(&line[name_end + 1..]).map_err(|m| format!("line {n}: {m}"))?
        } else {
            (BTreeMap::new(), &line[name_end..])
        };
        let rest = rest
            .strip_prefix(' ')
            .ok_or(format!("line {n}: no space before value"))?;
        let mut fields = rest.split(' ');
        let value =
            parse_value(fields.next().unwrap_or("")).map_err(|m| format!("line {n}: {m}"))?;
        if let Some(ts) = fields.next() {
            ts.parse::<i64>()
                .map_err(|_| format!("line {n}: bad timestamp"))?;
        }
        let family = family_of(name, &e.types).ok_or(format!("line {n}: {name} has no TYPE"))?;
        families_seen.insert(family.to_string());
        if !series.insert(format!("{name}{labels:?}")) {
            return Err(format!("line {n}: series repeated"));
        }
        e.samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    check_histograms(&e)?;
    Ok(e)
}

/// Buckets cumulative, ending in `+Inf` equal to `_count`.
fn check_histograms(e: &Exposition) -> Result<(), String> {
    let mut buckets: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for s in e.samples.iter().filter(|s| s.name.ends_with("_bucket")) {
        let le = s.labels.get("le").ok_or(format!("{} without le", s.name))?;
        let mut rest = s.labels.clone();
        rest.remove("le");
        let key = format!("{}{rest:?}", s.name.trim_end_matches("_bucket"));
        buckets
            .entry(key)
            .or_default()
            .push((parse_value(le)?, s.value));
    }
    for (key, b) in buckets {
        if !b.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1) {
            return Err(format!("{key}: buckets not cumulative"));
        }
        let last = b.last().ok_or("empty histogram")?;
        if last.0 != f64::INFINITY {
            return Err(format!("{key}: no +Inf bucket"));
        }
        let count = e
            .samples
            .iter()
            .find(|s| {
                s.name.ends_with("_count") && {
                    let k = format!("{}{:?}", s.name.trim_end_matches("_count"), s.labels);
                    k == key
                }
            })
            .ok_or(format!("{key}: no _count"))?;
        if count.value != last.1 {
            return Err(format!(
                "{key}: +Inf bucket {} != count {}",
                last.1, count.value
            ));
        }
    }
    Ok(())
}

/// `GET path` from `127.0.0.1:port`: status and body.
pub fn http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    Ok((status, body))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

#[test]
fn the_parser_rejects_malformed_text() {
    let ok = "# TYPE a counter\na{x=\"1\"} 2\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n";
    let e = parse(ok).unwrap();
    assert_eq!(e.value("a", &[("x", "1")]), 2.0);
    for bad in [
        "a 1\n",                        // no TYPE
        "# TYPE a counter\na{x=1} 2\n", // unquoted
        "# TYPE a counter\na 1\na 2\n", // repeated series
        "# TYPE h histogram\nh_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} 2\nh_count 2\n",
        "# TYPE a counter\na{x=\"1\"}2\n", // no space
    ] {
        assert!(parse(bad).is_err(), "accepted {bad:?}");
    }
}
