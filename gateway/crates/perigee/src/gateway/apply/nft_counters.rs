//! Reading the table's named nft counters (bypass rules, overflow SYNs, QUIC rejected, DNS
//! intercepted) and the peer path's duplicate counters for the counters report.
use super::super::render::{DUP_COUNTER, DUP_TABLE, TABLE};
use super::command::run;
use std::collections::HashMap;

/// Where the counters report finds the peer path's copies (both families' duplicate tables,
/// summed) among `inet perigee`'s named counters, whose names never take this form.
pub const DUP_KEY: &str = "peer redundancy";

/// Every named counter of our tables, in one `nft` call: `inet perigee`'s by name → (packets,
/// bytes), and the duplicate tables' under `DUP_KEY`. Other tables' counters are left out.
pub fn read_counters() -> HashMap<String, (u64, u64)> {
    let out = run(
        "nft",
        &["-j".into(), "list".into(), "counters".into()],
        None,
    );
    out.ok()
        .and_then(|o| serde_json::from_str::<serde_json::Value>(&o).ok())
        .map(|v| parse_counters(&v))
        .unwrap_or_default()
}

fn parse_counters(v: &serde_json::Value) -> HashMap<String, (u64, u64)> {
    let mut m: HashMap<String, (u64, u64)> = HashMap::new();
    for item in v["nftables"].as_array().into_iter().flatten() {
        let Some(c) = item.get("counter") else {
            continue;
        };
        let (Some(n), Some(p), Some(b)) = (
            c["name"].as_str(),
            c["packets"].as_u64(),
            c["bytes"].as_u64(),
        ) else {
            continue;
        };
        match (c["family"].as_str(), c["table"].as_str()) {
            (Some("inet"), Some(TABLE)) => {
                m.insert(n.to_string(), (p, b));
            }
            (Some("ip" | "ip6"), Some(DUP_TABLE)) if n == DUP_COUNTER => {
                let e = m.entry(DUP_KEY.to_string()).or_default();
                *e = (e.0 + p, e.1 + b);
            }
            _ => {}
        }
    }
    m
}

pub fn read_counter(name: &str) -> Option<(u64, u64)> {
    let out = run(
        "nft",
        &[
            "-j".into(),
            "list".into(),
            "counter".into(),
            "inet".into(),
            TABLE.into(),
            name.into(),
        ],
        None,
    )
    .ok()?;
    let v: serde_json::Value = serde_json::from_str(&out).ok()?;
    parse_counters(&v).remove(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_by_name_from_nft_json() {
        let v = serde_json::json!({"nftables": [
            {"metainfo": {"version": "1.0.6"}},
            {"counter": {"family": "inet", "name": "bypass", "table": "perigee", "packets": 3, "bytes": 300}},
            {"counter": {"family": "inet", "name": "bypass_entry_0", "table": "perigee", "packets": 2, "bytes": 200}},
            {"counter": {"family": "inet", "name": "broken", "table": "perigee"}},
            {"counter": {"family": "inet", "name": "bypass", "table": "someone_else", "packets": 9, "bytes": 900}},
            {"counter": {"family": "ip", "name": "duplicated", "table": "perigee_dup", "packets": 4, "bytes": 4000}},
            {"counter": {"family": "ip6", "name": "duplicated", "table": "perigee_dup", "packets": 1, "bytes": 1000}}
        ]});
        let m = parse_counters(&v);
        assert_eq!(m.len(), 3);
        assert_eq!(m["bypass"], (3, 300));
        assert_eq!(m["bypass_entry_0"], (2, 200));
        assert_eq!(m[DUP_KEY], (5, 5000));
        assert!(parse_counters(&serde_json::json!({})).is_empty());
    }
}
