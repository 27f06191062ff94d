/// A sample configuration (the satlab terminal); used by tests and `perigee config` docs.
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
        "served_subnets": ["10.71.1.0/24", "fd71:1::/64"],
        "splitter": {"enabled": true, "tproxy_port": 7071, "max_flows": 10000, "connect_timeout_ms": 10000,
                     "idle_timeout_s": 600, "relay_buffer_bytes": 262144},
        "satellite": {"congestion_control": "hybla", "sndbuf_bytes": 4194304, "rcvbuf_bytes": 4194304,
                      "pacing_rate_bps": 0, "initcwnd": 10, "initrwnd": 10,
                      "routes": [{"dst": "10.71.3.0/24", "via": "10.71.2.2"}, {"dst": "fd71:3::/64", "via": "fd71:2::2"}]},
        "hybla": {"rtt0_ms": 25, "base_rtt_ms": 0, "cwnd_max": 0},
        "classes": [{"name": "web", "priority": 100,
                     "match": {"src": ["10.71.1.0/24"], "dst": [], "protocol": "tcp", "dports": ["80", "8000-8080"],
                               "sports": [], "dscp": [], "iifname": []},
                     "action": "accelerate", "satellite": {"congestion_control": "hybla", "buffer_bytes": 0, "pacing_rate_bps": 0}}],
        "bypass": bypass,
        "cache": {"enabled": false, "port": 3129},
        "dns": {"enabled": false, "upstream": ["10.71.3.53"]},
        "sysctls": {"net.ipv4.tcp_slow_start_after_idle": "0"}
    })
}
