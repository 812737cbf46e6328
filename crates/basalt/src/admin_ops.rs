//! `basalt admin` verbs for day-to-day operations: write permission of a
//! broker, offset resets, producer connections, consumers' running info,
//! live broker settings (docs/protocol.md#operations), POP consumption
//! (docs/pop.md#operations).

use basalt_client::{Admin, ClientError};
use serde_json::json;

use crate::admin_output::Report;

/// `basalt admin write-perm --broker-name X --off|--on`: one row per
/// NameServer with the topics it changed.
pub async fn write_perm(
    admin: &Admin,
    broker_name: &str,
    writable: bool,
) -> Result<Report, String> {
    let rows = admin
        .set_broker_write_perm(broker_name, writable)
        .await
        .map_err(|e: ClientError| e.to_string())?;
    let what = if writable { "writable" } else { "read-only" };
    let mut r = Report::new();
    let t = r.table("namesrvs", &["namesrv", "topics"]);
    for (ns, count) in rows {
        r.row(t, vec![json!(ns), json!(count)]);
    }
    r.field(
        "writable",
        writable,
        format!("broker {broker_name} is {what} in every topic"),
    );
    Ok(r)
}

/// `basalt admin reset-offset` / `skip-accumulated` (`timestamp_ms` -1):
/// the new offset of every queue.
pub async fn reset_offset(
    admin: &Admin,
    group: &str,
    topic: &str,
    timestamp_ms: i64,
    force: bool,
) -> Result<Report, String> {
    let table = admin
        .reset_offset_by_time(group, topic, timestamp_ms, force)
        .await
        .map_err(|e| e.to_string())?;
    let mut r = Report::new();
    let t = r.table("queues", &["topic", "broker", "queue", "offset"]);
    for (q, offset) in &table {
        r.row(
            t,
            vec![
                json!(q.topic),
                json!(q.broker_name),
                json!(q.queue_id),
                json!(offset),
            ],
        );
    }
    r.field(
        "reset",
        table.len(),
        format!("group {group}: {} queue(s) reset", table.len()),
    );
    Ok(r)
}

/// `basalt admin producer -g GROUP -t TOPIC`.
pub async fn producer(admin: &Admin, group: &str, topic: &str) -> Result<Report, String> {
    let c = admin
        .producer_connections(group, topic)
        .await
        .map_err(|e| e.to_string())?;
    let mut r = Report::new();
    let t = r.table("connections", &["client", "address", "language", "version"]);
    for conn in &c.connection_set {
        r.row(
            t,
            vec![
                json!(conn.client_id),
                json!(conn.client_addr),
                json!(conn.language),
                json!(conn.version),
            ],
        );
    }
    Ok(r)
}

/// `basalt admin consumer-status -g GROUP [--client-id ID]`: each
/// consumer's settings and queues.
pub async fn consumer_status(
    admin: &Admin,
    group: &str,
    client_id: Option<&str>,
) -> Result<Report, String> {
    let clients: Vec<String> = match client_id {
        Some(id) => vec![id.to_string()],
        None => admin
            .consumer_connections(group)
            .await
            .map_err(|e| e.to_string())?
            .connection_set
            .into_iter()
            .map(|c| c.client_id)
            .collect(),
    };
    let mut r = Report::new();
    for id in clients {
        let info = admin
            .consumer_running_info(group, &id)
            .await
            .map_err(|e| format!("{id}: {e}"))?;
        r.text(format!("client {id}"));
        let p = r.table("properties", &["client", "key", "value"]);
        for (k, v) in &info.properties {
            r.row(p, vec![json!(id), json!(k), v.clone()]);
        }
        let t = r.table(
            "queues",
            &[
                "client",
                "topic",
                "broker",
                "queue",
                "committed",
                "cached",
                "maxCached",
            ],
        );
        let mut queues = info.mq_table;
        queues.sort_by(|a, b| a.0.cmp(&b.0));
        for (mq, pq) in &queues {
            r.row(
                t,
                vec![
                    json!(id),
                    json!(mq.topic),
                    json!(mq.broker_name),
                    json!(mq.queue_id),
                    json!(pq.commit_offset),
                    json!(pq.cached_msg_count),
                    json!(pq.cached_msg_max_offset),
                ],
            );
        }
    }
    Ok(r)
}

/// `basalt admin pop [-b ADDR] [-g GROUP]`: per broker its messages
/// popped and not acked and its revive lag, then per group and topic read
/// the messages in flight (only `group`'s, when given).
pub async fn pop(admin: &Admin, brokers: &[String], group: Option<&str>) -> Result<Report, String> {
    let mut r = Report::new();
    let b = r.table("brokers", &["broker", "inFlight", "reviveLagMs"]);
    let mut rows = Vec::new();
    for addr in brokers {
        let s = admin
            .pop_status(addr)
            .await
            .map_err(|e| format!("{addr}: {e}"))?;
        r.row(
            b,
            vec![json!(addr), json!(s.in_flight), json!(s.revive_lag_ms)],
        );
        for g in s.groups {
            if group.is_none_or(|want| want == g.group) {
                rows.push((addr.clone(), g));
            }
        }
    }
    let t = r.table("groups", &["broker", "group", "topic", "inFlight"]);
    let total: u64 = rows.iter().map(|(_, g)| g.in_flight).sum();
    for (addr, g) in rows {
        r.row(
            t,
            vec![
                json!(addr),
                json!(g.group),
                json!(g.topic),
                json!(g.in_flight),
            ],
        );
    }
    let whose = group.map_or(String::new(), |g| format!(" of {g}"));
    r.field(
        "groupsInFlight",
        total,
        format!("{total} message(s){whose} popped and not acked"),
    );
    Ok(r)
}

/// A `--time` value: milliseconds since the epoch, `now`, or
/// `yyyy-MM-ddTHH:mm:ss[.SSS]` in UTC (a trailing `Z` is allowed).
pub fn parse_time(s: &str) -> Result<i64, String> {
    let bad = || format!("--time {s:?}: expected ms since the epoch, now, or yyyy-MM-ddTHH:mm:ss");
    if s == "now" {
        return Ok(basalt_common::time::now_millis());
    }
    if let Ok(ms) = s.parse::<i64>() {
        return if ms >= 0 { Ok(ms) } else { Err(bad()) };
    }
    let s2 = s.strip_suffix('Z').unwrap_or(s);
    let (date, time) = s2.split_once('T').ok_or_else(bad)?;
    let num = |v: &str| v.parse::<i64>().map_err(|_| bad());
    let d: Vec<&str> = date.split('-').collect();
    let (clock, millis) = match time.split_once('.') {
        Some((c, f)) if f.len() == 3 => (c, num(f)?),
        Some(_) => return Err(bad()),
        None => (time, 0),
    };
    let t: Vec<&str> = clock.split(':').collect();
    if d.len() != 3 || t.len() != 3 {
        return Err(bad());
    }
    let (y, mo, day) = (num(d[0])?, num(d[1])?, num(d[2])?);
    let (h, mi, sec) = (num(t[0])?, num(t[1])?, num(t[2])?);
    if !(1970..=9999).contains(&y)
        || !(1..=12).contains(&mo)
        || !(1..=31).contains(&day)
        || h > 23
        || mi > 59
        || sec > 59
    {
        return Err(bad());
    }
    let days = days_from_civil(y, mo, day);
    Ok(((days * 24 + h) * 60 + mi) * 60_000 + sec * 1000 + millis)
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's
/// algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::parse_time;

    #[test]
    fn times_parse_as_ms_or_utc_dates() {
        assert_eq!(parse_time("1700000000000"), Ok(1_700_000_000_000));
        assert_eq!(parse_time("1970-01-01T00:00:00"), Ok(0));
        assert_eq!(parse_time("2023-11-14T22:13:20Z"), Ok(1_700_000_000_000));
        assert_eq!(parse_time("2024-02-29T00:00:01.250"), Ok(1_709_164_801_250));
        assert!(parse_time("2024-13-01T00:00:00").is_err());
        assert!(parse_time("yesterday").is_err());
        assert!(parse_time("-5").is_err());
    }
}
