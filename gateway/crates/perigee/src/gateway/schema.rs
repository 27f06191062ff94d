//! The control protocol's JSON Schema, derived from the Rust types (schemars): what the API sends
//! (`config`: GatewayConfig) and what the daemon answers (`reports`: health, counters, flows, the
//! cache's and the resolver's stats, apply and validate results, errors). Both are committed under
//! gateway/schema/ (`make -C gateway schema` writes them; a test fails while they are stale); the
//! API's pydantic models are generated from them, and the OpenAPI carries those into the
//! dashboard's TypeScript client (docs/ARCHITECTURE.md, *One schema*).
use super::cluster::table::ClusterTable;
use super::cluster_control::ClusterTableStatus;
use super::config::GatewayConfig;
use super::control_tls::{CrlInstalled, CrlUpdate};
use super::interfaces::InterfaceList;
use super::reports::{
    Applied, Counters, DnsReport, ErrorBody, FlowList, Health, RoutingReport, Validated,
};
use super::reports_peer::{IdentityReport, PeerStatus};
use perigee_squid::{CacheStats, CollectResponse, PurgeRequest, PurgeResponse};
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{json, Value};

/// Where the committed files live, relative to the workspace (gateway/).
pub const CONFIG_FILE: &str = "schema/config.schema.json";
pub const REPORTS_FILE: &str = "schema/reports.schema.json";

const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// The config document: what `PUT /v1/config` takes. Deserialization contract: a field with a
/// default may be left out.
pub fn config_schema() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator();
    let mut schema = generator.into_root_schema_for::<GatewayConfig>().to_value();
    schema["$schema"] = DIALECT.into();
    schema["description"] = "A Perigee gateway's configuration (control protocol v1): what PUT /v1/config takes. \
        Generated from the gateway's Rust types (gateway/crates/perigee/src/gateway/config/); rules between \
        fields are the gateway's validator's (and the API's cross-field validators')."
        .into();
    schema
}

/// Every answer type of the control socket, as named definitions. Serialization contract:
/// every field is present (null where optional).
pub fn reports_schema() -> Value {
    let mut g = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    let roots = [
        define::<Health>(&mut g),
        define::<Counters>(&mut g),
        define::<FlowList>(&mut g),
        define::<CacheStats>(&mut g),
        define::<CollectResponse>(&mut g),
        define::<PurgeResponse>(&mut g),
        define::<DnsReport>(&mut g),
        define::<Applied>(&mut g),
        define::<Validated>(&mut g),
        define::<ErrorBody>(&mut g),
        define::<InterfaceList>(&mut g),
        define::<RoutingReport>(&mut g),
        define::<IdentityReport>(&mut g),
        define::<PeerStatus>(&mut g),
        define::<CrlInstalled>(&mut g),
        define::<ClusterTableStatus>(&mut g),
    ];
    // The requests the daemon takes besides the config (deserialization contract, its own generator).
    let mut input = SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator();
    let inputs = [
        define::<PurgeRequest>(&mut input),
        define::<CrlUpdate>(&mut input),
        define::<ClusterTable>(&mut input),
    ];
    let mut defs = g.take_definitions(true);
    defs.extend(input.take_definitions(true));
    json!({
        "$schema": DIALECT,
        "title": "PerigeeReports",
        "description": "What a Perigee gateway's control socket answers (control protocol v1), generated from \
            its Rust types (gateway/crates/perigee/src/gateway/reports.rs and the types they hold).",
        "x-roots": roots.iter().chain(inputs.iter()).collect::<Vec<_>>(),
        "$defs": defs,
    })
}

/// Registers `T` as a named definition; returns its name.
fn define<T: JsonSchema>(g: &mut SchemaGenerator) -> String {
    g.subschema_for::<T>();
    T::schema_name().into_owned()
}

/// The schema as committed: pretty JSON, keys sorted, one trailing newline.
pub fn render(schema: &Value) -> String {
    let mut text = serde_json::to_string_pretty(schema).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::config::{example_json, from_value};

    /// The example config with `bypass` replaced, parsed and validated.
    fn with_bypass(bypass: Value) -> Result<crate::gateway::config::GatewayConfig, String> {
        let mut j = example_json();
        j["bypass"] = bypass;
        from_value(j).map_err(|e| format!("{e:?}"))
    }

    #[test]
    fn the_builtin_bypass_list_is_in_the_schema_and_valid() {
        use crate::gateway::config::Bypass;
        let schema = config_schema();
        let field = &schema["properties"]["bypass"];
        let builtin: Vec<Bypass> = serde_json::from_value(field["x-builtin"].clone()).unwrap();
        let names: Vec<&str> = field["x-builtin"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["ipsec-esp", "ipsec-ah", "ike", "nat-t", "ike-tcp"]);
        assert!(builtin.iter().all(|b| b.builtin));
        // A config carrying exactly the built-in entries is valid (and the example carries them).
        let c = with_bypass(field["x-builtin"].clone()).unwrap();
        assert_eq!(c.bypass.len(), builtin.len());
        let example = example_json();
        let listed: Vec<&str> = example["bypass"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["builtin"] == true)
            .map(|b| b["name"].as_str().unwrap())
            .collect();
        assert_eq!(listed, names);
    }

    #[test]
    fn the_schema_names_the_bypass_protocols_that_take_ports() {
        use crate::gateway::config::BypassProtocol;
        let schema = config_schema();
        let ports = &schema["$defs"]["BypassRule"]["properties"]["ports"];
        assert_eq!(ports["x-protocols"], serde_json::json!(["tcp", "udp"]));
        // Any other protocol with ports is refused: the keyword says what the validator accepts.
        for p in BypassProtocol::ALL {
            let entry = serde_json::json!([{"name": "x", "protocol": p, "ports": ["443"], "cidrs": ["192.0.2.0/24"]}]);
            assert_eq!(with_bypass(entry).is_ok(), p.has_ports(), "{p:?}");
        }
    }

    fn workspace_file(rel: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(rel);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    #[test]
    fn committed_schemas_are_current() {
        for (file, fresh) in [
            (CONFIG_FILE, render(&config_schema())),
            (REPORTS_FILE, render(&reports_schema())),
        ] {
            assert!(
                workspace_file(file) == fresh,
                "gateway/{file} is stale: run `make -C gateway schema` (then `make -C api models`) and commit"
            );
        }
    }

    /// Resolves a `$ref` to `#/$defs/Name`.
    fn deref<'a>(root: &'a Value, s: &'a Value) -> &'a Value {
        match s.get("$ref").and_then(Value::as_str) {
            Some(r) => &root["$defs"][r.trim_start_matches("#/$defs/")],
            None => s,
        }
    }

    /// Every integer field with bounds in the schema, as (JSON path, minimum, maximum), walking
    /// objects (and the first element of arrays the example config fills).
    fn bounded(root: &Value, s: &Value, path: &[String], out: &mut Vec<(Vec<String>, i64, i64)>) {
        let s = deref(root, s);
        if let Some(props) = s.get("properties").and_then(Value::as_object) {
            for (k, v) in props {
                let mut p = path.to_vec();
                p.push(k.clone());
                bounded(root, v, &p, out);
            }
        }
        if s["type"] == "integer" {
            let (min, max) = (s["minimum"].as_i64(), s["maximum"].as_i64());
            if let (Some(min), Some(max)) = (min, max) {
                out.push((path.to_vec(), min, max));
            }
        }
        if s["type"] == "array" {
            let mut p = path.to_vec();
            p.push("0".into());
            bounded(root, &s["items"], &p, out);
        }
    }

    fn set(j: &mut Value, path: &[String], v: Value) -> bool {
        let mut cur = j;
        for p in &path[..path.len() - 1] {
            cur = match p.parse::<usize>() {
                Ok(i) => match cur.get_mut(i) {
                    Some(c) => c,
                    None => return false,
                },
                Err(_) => {
                    if cur.get(p.as_str()).is_none() {
                        cur[p.as_str()] = json!({});
                    }
                    &mut cur[p.as_str()]
                }
            };
        }
        let last = path[path.len() - 1].as_str();
        match last.parse::<usize>() {
            Ok(i) => match cur.get_mut(i) {
                Some(slot) => *slot = v,
                None => return false,
            },
            Err(_) => cur[last] = v,
        }
        true
    }

    /// The schema's bounds are the validator's: one past either end is refused (in
    /// deserialization or validation), and the ends themselves are accepted where no other
    /// field's rule forbids them.
    #[test]
    fn schema_bounds_are_the_validators_bounds() {
        let root = config_schema();
        let mut fields = Vec::new();
        bounded(&root, &root, &[], &mut fields);
        assert!(
            fields.len() > 40,
            "only {} bounded fields found",
            fields.len()
        );
        // Ends that another rule refuses in the example config.
        let cross_field = [
            "schema",               // 1..1: exercised below
            "splitter.tproxy_port", // 53 / 3129 / 3130 are taken by others, not the ends
            "cache.admin_port",     // must differ from cache.port
            "cache.port",
            "cache.max_memory_object_mb", // at most max_object_mb
            "cache.max_object_mb",
            "cache.disk_mb", // rock stores at most 262144
            "cache.refresh_patterns.0.min_minutes",
            "cache.refresh_patterns.0.max_minutes",
            "dns.min_ttl_s", // at most max_ttl_s
            "dns.max_ttl_s",
            "peer.port", // a hub's peer port must not be one of its listeners
            "served_limits.ipv4_prefix", // the example's subnets need /8 or wider... of /24s
            "served_limits.ipv6_prefix",
            "shaping.rate_bps", // 1..7999 is refused, 0 means none
        ];
        for (path, min, max) in fields {
            let name = path.join(".");
            for (v, ok) in [
                (min - 1, false),
                (max.saturating_add(1), false),
                (min, true),
                (max, true),
            ] {
                let mut j = example_json();
                if !set(&mut j, &path, json!(v)) {
                    continue; // an array the example leaves empty
                }
                let accepted = from_value(j).is_ok();
                if ok && cross_field.contains(&name.as_str()) {
                    continue;
                }
                assert_eq!(accepted, ok, "{name} = {v} (schema bounds {min}..={max})");
            }
        }
    }

    #[test]
    fn config_schema_names_the_value_types_and_refuses_unknown_fields() {
        let root = config_schema();
        for name in [
            "Cidr",
            "PortRange",
            "IfName",
            "ObjectName",
            "IpAddr",
            "Upstream",
            "TrafficClass",
        ] {
            assert!(root["$defs"].get(name).is_some(), "no $defs/{name}");
        }
        assert_eq!(root["additionalProperties"], false);
        assert_eq!(root["$defs"]["Splitter"]["additionalProperties"], false);
        assert_eq!(
            root["required"],
            json!(["role", "interfaces", "served_subnets"])
        );
        // Defaults are the Rust ones.
        assert_eq!(root["properties"]["quic"]["default"], "fallback");
        assert_eq!(
            root["$defs"]["Splitter"]["properties"]["max_flows"]["default"],
            10_000
        );
    }

    #[test]
    fn reports_describe_what_the_daemon_sends() {
        let root = reports_schema();
        let flow = &root["$defs"]["Flow"];
        assert_eq!(
            root["$defs"]["FlowState"]["enum"],
            json!(["connecting", "established", "half_closed", "closed"])
        );
        assert!(flow["required"]
            .as_array()
            .unwrap()
            .contains(&json!("legs")));
        let health = &root["$defs"]["Health"]["properties"];
        assert!(health.get("config_revision").is_some() && health.get("hybla").is_some());
        // A config's default renders with every field the schema requires.
        let cfg = from_value(example_json()).unwrap();
        let back = serde_json::to_value(&cfg).unwrap();
        for k in config_schema()["properties"].as_object().unwrap().keys() {
            assert!(back.get(k).is_some(), "GET /v1/config lacks {k}");
        }
    }
}
