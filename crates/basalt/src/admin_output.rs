//! What a `basalt admin` verb shows: [`Report`] collects tables, fields
//! and prose as the verb finds them, then prints them as aligned tables
//! (the default) or as one JSON object (`--json`).

use serde_json::{Map, Value};

/// One part of a report, in the order the verb added it.
#[derive(Debug)]
enum Item {
    /// Prose: printed in table mode only.
    Text(String),
    /// A table; rows go to `Report::tables[index]`.
    Table(usize),
    /// A named value: `text` in table mode, `key: value` in JSON.
    Field {
        key: String,
        value: Value,
        text: String,
    },
}

#[derive(Debug)]
struct TableData {
    name: String,
    columns: Vec<String>,
    rows: Vec<Vec<Value>>,
    /// Rows of this table go to JSON only (the table mode says the same
    /// in prose).
    json_only: bool,
}

/// See the module documentation. Invariant: every row has as many cells
/// as its table has columns (missing cells are null, extra ones dropped).
#[derive(Debug, Default)]
pub struct Report {
    items: Vec<Item>,
    tables: Vec<TableData>,
}

/// A handle on a table of a [`Report`].
#[derive(Debug, Clone, Copy)]
pub struct TableId(usize);

impl Report {
    pub fn new() -> Self {
        Self::default()
    }

    /// A line of prose (table mode only).
    pub fn text(&mut self, s: impl Into<String>) {
        self.items.push(Item::Text(s.into()));
    }

    /// A value under `key` in JSON, shown as `text` in table mode.
    pub fn field(&mut self, key: &str, value: impl Into<Value>, text: impl Into<String>) {
        self.items.push(Item::Field {
            key: key.to_string(),
            value: value.into(),
            text: text.into(),
        });
    }

    /// Starts a table. In JSON, tables of the same name are one array of
    /// row objects keyed by column name.
    pub fn table(&mut self, name: &str, columns: &[&str]) -> TableId {
        self.add_table(name, columns, false)
    }

    /// A table that only JSON shows.
    pub fn json_table(&mut self, name: &str, columns: &[&str]) -> TableId {
        self.add_table(name, columns, true)
    }

    fn add_table(&mut self, name: &str, columns: &[&str], json_only: bool) -> TableId {
        self.tables.push(TableData {
            name: name.to_string(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows: Vec::new(),
            json_only,
        });
        let id = self.tables.len() - 1;
        self.items.push(Item::Table(id));
        TableId(id)
    }

    /// Adds a row to `t`.
    pub fn row(&mut self, t: TableId, mut cells: Vec<Value>) {
        let table = &mut self.tables[t.0];
        cells.resize(table.columns.len(), Value::Null);
        table.rows.push(cells);
    }

    /// Prints the report as tables or as JSON.
    pub fn print(&self, json: bool) {
        if json {
            println!(
                "{}",
                serde_json::to_string_pretty(&self.to_json()).unwrap_or_default()
            );
        } else {
            print!("{}", self.to_text());
        }
    }

    /// The JSON form: one object, tables as arrays of row objects.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        for item in &self.items {
            match item {
                Item::Text(_) => {}
                Item::Field { key, value, .. } => {
                    out.insert(key.clone(), value.clone());
                }
                Item::Table(i) => {
                    let t = &self.tables[*i];
                    let rows = t.rows.iter().map(|r| {
                        let obj: Map<String, Value> =
                            t.columns.iter().cloned().zip(r.iter().cloned()).collect();
                        Value::Object(obj)
                    });
                    let entry = out
                        .entry(t.name.clone())
                        .or_insert_with(|| Value::Array(Vec::new()));
                    if let Value::Array(a) = entry {
                        a.extend(rows);
                    }
                }
            }
        }
        Value::Object(out)
    }

    /// The table form: columns padded to their widest cell.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for item in &self.items {
            match item {
                Item::Text(t) | Item::Field { text: t, .. } => {
                    if !t.is_empty() {
                        s.push_str(t);
                        s.push('\n');
                    }
                }
                Item::Table(i) if !self.tables[*i].json_only => {
                    s.push_str(&render_table(&self.tables[*i]));
                }
                Item::Table(_) => {}
            }
        }
        s
    }
}

/// A cell as table text: strings bare, null as `-`.
fn cell_text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn render_table(t: &TableData) -> String {
    let cells: Vec<Vec<String>> = t
        .rows
        .iter()
        .map(|r| r.iter().map(cell_text).collect())
        .collect();
    let widths: Vec<usize> = t
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            cells
                .iter()
                .map(|r| r[i].chars().count())
                .chain([c.chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let numeric: Vec<bool> = (0..t.columns.len())
        .map(|i| !t.rows.is_empty() && t.rows.iter().all(|r| r[i].is_number()))
        .collect();
    let line = |vals: &[String]| {
        let mut l = String::new();
        for (i, v) in vals.iter().enumerate() {
            if i > 0 {
                l.push_str("  ");
            }
            let pad = widths[i].saturating_sub(v.chars().count());
            let last = i + 1 == vals.len();
            if numeric[i] {
                l.push_str(&" ".repeat(pad));
                l.push_str(v);
            } else {
                l.push_str(v);
                if !last {
                    l.push_str(&" ".repeat(pad));
                }
            }
        }
        l.push('\n');
        l
    };
    let mut s = line(&t.columns);
    for r in &cells {
        s.push_str(&line(r));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_align_and_json_keys_rows_by_column() {
        let mut r = Report::new();
        r.text("heading");
        let t = r.table("queues", &["broker", "queue", "offset"]);
        r.row(t, vec![json!("broker-a"), json!(0), json!(12)]);
        r.row(t, vec![json!("b"), json!(10), json!(3)]);
        r.field("totalLag", 15, "total lag 15");
        let text = r.to_text();
        assert_eq!(
            text,
            "heading\nbroker    queue  offset\nbroker-a      0      12\nb            10       3\ntotal lag 15\n"
        );
        let j = r.to_json();
        assert_eq!(j["queues"][1]["queue"], 10);
        assert_eq!(j["totalLag"], 15);
        assert!(j.get("heading").is_none());
    }

    #[test]
    fn json_only_tables_and_short_rows() {
        let mut r = Report::new();
        let t = r.json_table("brokers", &["addr", "count"]);
        r.row(t, vec![json!("x")]);
        r.text("broker x: 0");
        assert_eq!(r.to_text(), "broker x: 0\n");
        assert_eq!(r.to_json()["brokers"][0]["count"], Value::Null);
    }
}
