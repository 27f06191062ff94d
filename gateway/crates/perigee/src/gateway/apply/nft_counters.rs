//! Reading the table's named nft counters (bypass rules, overflow SYNs, QUIC rejected, DNS
//! intercepted) for the counters report.
use super::super::render::TABLE;
use super::command::run;
use std::collections::HashMap;

/// Every named counter of the table: name → (packets, bytes), in one `nft` call.
pub fn read_counters() -> HashMap<String, (u64, u64)> {
    let out = run(
        "nft",
        &[
            "-j".into(),
            "list".into(),
            "counters".into(),
            "table".into(),
            "inet".into(),
            TABLE.into(),
        ],
        None,
    );
    out.ok()
        .and_then(|o| serde_json::from_str::<serde_json::Value>(&o).ok())
        .map(|v| parse_counters(&v))
        .unwrap_or_default()
}

fn parse_counters(v: &serde_json::Value) -> HashMap<String, (u64, u64)> {
    let mut m = HashMap::new();
    for item in v["nftables"].as_array().into_iter().flatten() {
        if let Some(c) = item.get("counter") {
            if let (Some(n), Some(p), Some(b)) = (
                c["name"].as_str(),
                c["packets"].as_u64(),
                c["bytes"].as_u64(),
            ) {
                m.insert(n.to_string(), (p, b));
            }
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
            {"counter": {"family": "inet", "name": "broken", "table": "perigee"}}
        ]});
        let m = parse_counters(&v);
        assert_eq!(m.len(), 2);
        assert_eq!(m["bypass_entry_0"], (2, 200));
        assert!(parse_counters(&serde_json::json!({})).is_empty());
    }
}
