use super::*;

const CLUSTER: &str = "DefaultCluster";

fn view(s: &StatsItems, name: &str, key: &str, now: i64) -> Option<[StatsFigure; 3]> {
    s.view(name, key, CLUSTER, (0, 0), now)
}

#[test]
fn a_fresh_item_reports_its_count_in_every_window() {
    let s = StatsItems::default();
    let t0 = 1_000_000_000;
    s.record_put("T", 16, 16_384);
    s.record_put("T", 4, 4_096);
    // Before any sample: counted from one interval back.
    let [m, h, d] = view(&s, names::TOPIC_PUT_NUMS, "T", t0).unwrap();
    assert_eq!((m.sum, h.sum, d.sum), (20, 20, 20));
    assert!((m.tps - 2.0).abs() < 1e-9, "{m:?}");
    assert!((m.avgpt - 10.0).abs() < 1e-9, "{m:?}");
    let [size, _, _] = view(&s, names::TOPIC_PUT_SIZE, "T", t0).unwrap();
    assert_eq!(size.sum, 20_480);
    // After the first sample too.
    s.sample(0, t0, (0, 0));
    let [m, h, d] = view(&s, names::TOPIC_PUT_NUMS, "T", t0 + 5_000).unwrap();
    assert_eq!((m.sum, h.sum, d.sum), (20, 20, 20));
    assert!(view(&s, names::TOPIC_PUT_NUMS, "other", t0).is_none());
    assert!(view(&s, "NO_SUCH_NAME", "T", t0).is_none());
}

#[test]
fn the_minute_window_forgets_older_traffic_and_the_day_keeps_it() {
    let s = StatsItems::default();
    let t0 = 1_000_000_000;
    s.record_get("g", "T", 100, 1_000, 30);
    for tick in 0..=20u64 {
        s.sample(tick, t0 + tick as i64 * 10_000, (0, 0));
    }
    // 200 s later with nothing new: the minute is empty, the day is not.
    let now = t0 + 200_000;
    let [m, h, d] = view(&s, names::GROUP_GET_NUMS, "T@g", now).unwrap();
    assert_eq!(m.sum, 0);
    assert_eq!(m.tps, 0.0);
    assert_eq!((h.sum, d.sum), (100, 100));
    // 60 more over the next 30 s: the minute has them, at 1 a second.
    for tick in 21..=23u64 {
        s.record_get("g", "T", 20, 200, 1);
        s.sample(tick, t0 + tick as i64 * 10_000, (0, 0));
    }
    let now = t0 + 230_000;
    let [m, _, d] = view(&s, names::GROUP_GET_NUMS, "T@g", now).unwrap();
    assert_eq!(m.sum, 60);
    assert!((m.tps - 1.0).abs() < 1e-9, "{m:?}");
    assert_eq!(d.sum, 160);
    // Latency: 30 ms for the first pull, 1 ms for each of the next three.
    let [_, _, lat] = view(&s, names::GROUP_GET_LATENCY, "T@g", now).unwrap();
    assert_eq!((lat.sum, lat.avgpt), (33, 8.25));
    assert!((s.group_get_tps("g", Some("T"), now) - 1.0).abs() < 1e-9);
    assert!((s.group_get_tps("g", None, now) - 1.0).abs() < 1e-9);
    assert_eq!(
        s.group_get_totals(),
        vec![("g".to_string(), "T".to_string(), 160, 1_600)]
    );
}

#[test]
fn an_idle_key_keeps_two_samples() {
    let mut w = Samples::default();
    for i in 0..100 {
        w.push(i * 10, [5, 0, 0, 1], 60);
    }
    assert_eq!(w.0.len(), 2);
    assert_eq!(w.base(990, 60), Some((930, [5, 0, 0, 1])));
}

#[test]
fn broker_totals_are_keyed_by_the_cluster() {
    let s = StatsItems::default();
    let t0 = 1_000_000_000;
    s.sample(0, t0, (10, 4));
    let [m, _, _] = s
        .view(
            names::BROKER_PUT_NUMS,
            CLUSTER,
            CLUSTER,
            (70, 4),
            t0 + 10_000,
        )
        .unwrap();
    // 10 before the first sample (from one interval back), 60 since.
    assert_eq!(m.sum, 70);
    let [g, _, _] = s
        .view(
            names::BROKER_GET_NUMS,
            CLUSTER,
            CLUSTER,
            (70, 4),
            t0 + 10_000,
        )
        .unwrap();
    assert_eq!(g.sum, 4);
    assert!(
        s.view(names::BROKER_PUT_NUMS, "other", CLUSTER, (0, 0), t0)
            .is_none()
    );
}

#[test]
fn deleting_a_topic_or_group_forgets_its_items() {
    let s = StatsItems::default();
    s.record_put("T", 1, 10);
    s.record_get("g", "T", 1, 10, 0);
    s.record_get("h", "U", 1, 10, 0);
    s.record_send_back("g", "T");
    s.sample(0, 1_000_000, (0, 0));
    s.forget_topic("T");
    assert!(view(&s, names::TOPIC_PUT_NUMS, "T", 1_000_000).is_none());
    assert!(view(&s, names::GROUP_GET_NUMS, "T@g", 1_000_000).is_none());
    assert!(view(&s, names::SNDBCK_PUT_NUMS, "T@g", 1_000_000).is_none());
    assert!(view(&s, names::GROUP_GET_NUMS, "U@h", 1_000_000).is_some());
    s.forget_group("h");
    assert!(view(&s, names::GROUP_GET_NUMS, "U@h", 1_000_000).is_none());
}
