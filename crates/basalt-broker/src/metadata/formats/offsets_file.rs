//! consumerOffset.json and delayOffset.json: offset tables that Java's
//! fastjson writes with bare integer keys (`{0:12,1:10}`), as Basalt does.

use std::collections::{BTreeMap, HashMap};

/// consumerOffset.json's table: `topic@group` → queue id → next offset.
pub type OffsetTable = HashMap<String, BTreeMap<i32, i64>>;

/// Parses `{"offsetTable":{"T@G":{0:12,1:10}}}` (bare or quoted keys).
pub fn parse_offset_table(text: &str) -> Result<OffsetTable, String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct File {
        #[serde(default)]
        offset_table: HashMap<String, BTreeMap<String, i64>>,
    }
    let f: File = basalt_remoting::fastjson::from_str(text).map_err(|e| e.to_string())?;
    let mut out = HashMap::new();
    for (k, m) in f.offset_table {
        let mut inner = BTreeMap::new();
        for (q, o) in m {
            let q: i32 = q.parse().map_err(|_| format!("queue id {q:?} in {k}"))?;
            inner.insert(q, o);
        }
        out.insert(k, inner);
    }
    Ok(out)
}

/// Writes the table as Java does: keys sorted, bare integer inner keys.
pub fn render_offset_table(table: &OffsetTable) -> String {
    let mut keys: Vec<_> = table.keys().collect();
    keys.sort();
    let mut out = Vec::with_capacity(64 + table.len() * 64);
    out.extend_from_slice(b"{\"offsetTable\":{");
    for (i, k) in keys.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        basalt_remoting::json::write_str(&mut out, k);
        out.push(b':');
        basalt_remoting::fastjson::write_bare_key_i64_map(
            &mut out,
            table[*k].iter().map(|(q, o)| (*q as i64, *o)),
        );
    }
    out.extend_from_slice(b"}}");
    String::from_utf8(out).unwrap_or_default()
}

/// Parses delayOffset.json, `{"offsetTable":{1:0,2:15}}`: delay level →
/// next schedule-queue offset.
pub fn parse_delay_offsets(text: &str) -> Result<BTreeMap<i32, i64>, String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct File {
        #[serde(default)]
        offset_table: BTreeMap<String, i64>,
    }
    let f: File = basalt_remoting::fastjson::from_str(text).map_err(|e| e.to_string())?;
    f.offset_table
        .into_iter()
        .map(|(k, v)| k.parse::<i32>().map(|k| (k, v)).map_err(|e| e.to_string()))
        .collect()
}

/// Writes delayOffset.json (also GET_ALL_DELAY_OFFSET's body).
pub fn render_delay_offsets(table: &BTreeMap<i32, i64>) -> String {
    let mut out = Vec::new();
    out.extend_from_slice(b"{\"offsetTable\":");
    basalt_remoting::fastjson::write_bare_key_i64_map(
        &mut out,
        table.iter().map(|(k, v)| (*k as i64, *v)),
    );
    out.push(b'}');
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const OFFSETS_GOLDEN: &str = r#"{"offsetTable":{"%RETRY%H@H":{0:1},"T@G":{0:12,3:7}}}"#;
    const DELAY_GOLDEN: &str = r#"{"offsetTable":{1:0,2:15,18:3}}"#;

    #[test]
    fn consumer_offsets_golden() {
        let mut t = OffsetTable::new();
        t.insert("T@G".into(), [(0, 12), (3, 7)].into_iter().collect());
        t.insert("%RETRY%H@H".into(), [(0, 1)].into_iter().collect());
        assert_eq!(render_offset_table(&t), OFFSETS_GOLDEN);
        assert_eq!(parse_offset_table(OFFSETS_GOLDEN).unwrap(), t);
        // Java-written files with quoted keys parse too.
        let j = parse_offset_table(r#"{"offsetTable":{"A@B":{"1":5}}}"#).unwrap();
        assert_eq!(j["A@B"][&1], 5);
    }

    #[test]
    fn delay_offsets_golden() {
        let t: BTreeMap<i32, i64> = [(1, 0), (2, 15), (18, 3)].into_iter().collect();
        assert_eq!(render_delay_offsets(&t), DELAY_GOLDEN);
        assert_eq!(parse_delay_offsets(DELAY_GOLDEN).unwrap(), t);
    }
}
