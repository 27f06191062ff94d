/// A sample configuration (a terminal), `perigee config example`'s output and the tests' fixture. Its
/// addresses are documentation ones (RFC 5737, RFC 3849): an operator copies the shape, never the networks.
pub fn example_json() -> serde_json::Value {
    let mut bypass: Vec<serde_json::Value> = super::builtin_bypass()
        .iter()
        .map(|b| serde_json::to_value(b).expect("a bypass entry serializes"))
        .collect();
    bypass.push(serde_json::json!(
        {"name": "vpn-concentrator", "builtin": false, "protocol": "any", "cidrs": ["203.0.113.7/32"], "ports": []}
    ));
    serde_json::json!({
        "schema": 1, "revision": "v1", "role": "terminal",
        "interfaces": {"lan": ["lan0"], "satellite": "sat0"},
        "served_subnets": ["192.0.2.0/24", "2001:db8:1::/64"],
        "splitter": {"enabled": true, "tproxy_port": 7071, "max_flows": 10000, "connect_timeout_ms": 10000,
                     "idle_timeout_s": 600, "relay_buffer_bytes": 262144},
        "satellite": {"congestion_control": "hybla", "sndbuf_bytes": 4194304, "rcvbuf_bytes": 4194304,
                      "pacing_rate_bps": 0, "initcwnd": 10, "initrwnd": 0,
                      "routes": [{"dst": "198.51.100.0/24", "via": "203.0.113.2"}, {"dst": "2001:db8:3::/64", "via": "2001:db8:2::2"}]},
        "hybla": {"rtt0_ms": 25, "base_rtt_ms": 0, "cwnd_max": 0},
        "classes": [{"name": "web", "priority": 100,
                     "match": {"src": ["192.0.2.0/24"], "dst": [], "protocol": "tcp", "dports": ["80", "8000-8080"],
                               "sports": [], "dscp": [], "iifname": []},
                     "action": "accelerate", "satellite": {"congestion_control": "hybla", "buffer_bytes": 0, "pacing_rate_bps": 0}}],
        "bypass": bypass,
        "cache": {"enabled": false, "port": 3129},
        "dns": {"enabled": false, "upstream": ["198.51.100.53"]},
        "sysctls": {"net.ipv4.tcp_slow_start_after_idle": "0"}
    })
}
