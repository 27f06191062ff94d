//! Link parameters for one direction, their JSON form, and validated partial updates.
//!
//! Every field is optional in JSON; a partial object is merged onto the current values.
//! Nested `gilbert` / `bod` objects are partial too (missing fields keep the current value,
//! or the default when the feature was off); `null` switches the feature off.
//! Validation is all-or-nothing: an error names the field and changes nothing.

use serde_json::{json, Map, Value};

/// Gilbert–Elliott two-state loss model, stepped once per frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GilbertParams {
    /// P(Good → Bad) per frame.
    pub p_gb: f64,
    /// P(Bad → Good) per frame.
    pub p_bg: f64,
    /// Loss probability while in Good.
    pub loss_good: f64,
    /// Loss probability while in Bad.
    pub loss_bad: f64,
}

impl Default for GilbertParams {
    fn default() -> Self {
        GilbertParams {
            p_gb: 0.001,
            p_bg: 0.1,
            loss_good: 0.0,
            loss_bad: 0.5,
        }
    }
}

/// DVB-RCS-style Bandwidth on Demand (see `crate::bod` for the model).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BodParams {
    /// Constant Rate Assignment, always available.
    pub cra_bps: u64,
    /// Upper bound of a Rate-Based Dynamic Capacity grant.
    pub rbdc_max_bps: u64,
    pub superframe_ms: f64,
    pub allocation_delay_ms: f64,
    /// Requests are rounded up to a multiple of this.
    pub granularity_bps: u64,
    /// Backlog (volume) term of the request: ask for the rate that drains the bits queued at
    /// the boundary within this horizon, on top of the input rate; 0 = rate-only requests.
    /// Default one superframe: a VBDC volume is served in the next burst time plan when
    /// capacity allows, so the backlog is asked to go within one superframe.
    pub backlog_horizon_ms: f64,
}

impl Default for BodParams {
    fn default() -> Self {
        BodParams {
            cra_bps: 44_000,
            rbdc_max_bps: 1_100_000,
            superframe_ms: 820.0,
            allocation_delay_ms: 1346.0,
            granularity_bps: 44_000,
            backlog_horizon_ms: 820.0,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct LinkParams {
    /// One-way propagation delay.
    pub delay_ms: f64,
    /// Extra uniform random delay in [0, jitter_ms]; never reorders.
    pub jitter_ms: f64,
    /// Serialization rate in bits/s of L2 frames; 0 = unlimited.
    pub rate_bps: u64,
    /// Drop-tail limit in bytes (queued + in serialization); 0 = unlimited (1 GiB safety cap).
    pub buffer_bytes: u64,
    /// i.i.d. frame error rate.
    pub per: f64,
    /// Bit error rate: a frame of b bits is lost with probability 1 − (1 − ber)^b.
    pub ber: f64,
    pub gilbert: Option<GilbertParams>,
    pub bod: Option<BodParams>,
}

impl Default for LinkParams {
    fn default() -> Self {
        LinkParams {
            delay_ms: 300.0,
            jitter_ms: 0.0,
            rate_bps: 1_536_000,
            buffer_bytes: 262_144,
            per: 0.0,
            ber: 0.0,
            gilbert: None,
            bod: None,
        }
    }
}

/// Longest accepted delay/jitter/superframe value (one hour): guards against typos in units.
const MAX_MS: f64 = 3_600_000.0;

fn field_err(path: &str, what: &str) -> String {
    format!("field '{path}': {what}")
}

fn number(v: &Value, path: &str) -> Result<f64, String> {
    match v.as_f64() {
        Some(x) if x.is_finite() => Ok(x),
        _ => Err(field_err(path, "must be a number")),
    }
}

fn millis(v: &Value, path: &str, positive: bool) -> Result<f64, String> {
    let x = number(v, path)?;
    if positive && x <= 0.0 {
        return Err(field_err(path, "must be > 0"));
    }
    if !(0.0..=MAX_MS).contains(&x) {
        return Err(field_err(path, &format!("must be in [0, {MAX_MS}] ms")));
    }
    Ok(x)
}

fn probability(v: &Value, path: &str) -> Result<f64, String> {
    let x = number(v, path)?;
    if !(0.0..=1.0).contains(&x) {
        return Err(field_err(path, "must be a probability in [0, 1]"));
    }
    Ok(x)
}

fn count(v: &Value, path: &str, positive: bool) -> Result<u64, String> {
    let x = number(v, path)?;
    if x < 0.0 || x.fract() != 0.0 || x > 1e15 {
        return Err(field_err(path, "must be a non-negative integer"));
    }
    if positive && x == 0.0 {
        return Err(field_err(path, "must be > 0"));
    }
    Ok(x as u64)
}

fn object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| field_err(path, "must be a JSON object"))
}

impl GilbertParams {
    fn merged(mut self, v: &Value, path: &str) -> Result<Self, String> {
        for (k, val) in object(v, path)? {
            let p = format!("{path}.{k}");
            match k.as_str() {
                "p_gb" => self.p_gb = probability(val, &p)?,
                "p_bg" => self.p_bg = probability(val, &p)?,
                "loss_good" => self.loss_good = probability(val, &p)?,
                "loss_bad" => self.loss_bad = probability(val, &p)?,
                _ => return Err(field_err(&p, "unknown field")),
            }
        }
        Ok(self)
    }

    pub fn to_json(&self) -> Value {
        json!({"p_gb": self.p_gb, "p_bg": self.p_bg,
               "loss_good": self.loss_good, "loss_bad": self.loss_bad})
    }
}

impl BodParams {
    fn merged(mut self, v: &Value, path: &str) -> Result<Self, String> {
        for (k, val) in object(v, path)? {
            let p = format!("{path}.{k}");
            match k.as_str() {
                "cra_bps" => self.cra_bps = count(val, &p, false)?,
                "rbdc_max_bps" => self.rbdc_max_bps = count(val, &p, false)?,
                "superframe_ms" => self.superframe_ms = millis(val, &p, true)?,
                "allocation_delay_ms" => self.allocation_delay_ms = millis(val, &p, false)?,
                "granularity_bps" => self.granularity_bps = count(val, &p, true)?,
                "backlog_horizon_ms" => self.backlog_horizon_ms = millis(val, &p, false)?,
                _ => return Err(field_err(&p, "unknown field")),
            }
        }
        Ok(self)
    }

    pub fn to_json(&self) -> Value {
        json!({"cra_bps": self.cra_bps, "rbdc_max_bps": self.rbdc_max_bps,
               "superframe_ms": self.superframe_ms,
               "allocation_delay_ms": self.allocation_delay_ms,
               "granularity_bps": self.granularity_bps,
               "backlog_horizon_ms": self.backlog_horizon_ms})
    }
}

impl LinkParams {
    /// Returns a copy with the fields of the partial JSON object `v` applied, or an error
    /// naming the first invalid field (`prefix` is prepended to the field path).
    pub fn merged(&self, v: &Value, prefix: &str) -> Result<LinkParams, String> {
        let mut out = self.clone();
        let path = |k: &str| {
            if prefix.is_empty() {
                k.to_string()
            } else {
                format!("{prefix}.{k}")
            }
        };
        let whole = if prefix.is_empty() { "params" } else { prefix };
        for (k, val) in object(v, whole)? {
            let p = path(k);
            match k.as_str() {
                "delay_ms" => out.delay_ms = millis(val, &p, false)?,
                "jitter_ms" => out.jitter_ms = millis(val, &p, false)?,
                "rate_bps" => out.rate_bps = count(val, &p, false)?,
                "buffer_bytes" => out.buffer_bytes = count(val, &p, false)?,
                "per" => out.per = probability(val, &p)?,
                "ber" => out.ber = probability(val, &p)?,
                "gilbert" => {
                    out.gilbert = if val.is_null() {
                        None
                    } else {
                        Some(out.gilbert.unwrap_or_default().merged(val, &p)?)
                    }
                }
                "bod" => {
                    out.bod = if val.is_null() {
                        None
                    } else {
                        Some(out.bod.unwrap_or_default().merged(val, &p)?)
                    }
                }
                _ => return Err(field_err(&p, "unknown field")),
            }
        }
        Ok(out)
    }

    pub fn to_json(&self) -> Value {
        json!({
            "delay_ms": self.delay_ms,
            "jitter_ms": self.jitter_ms,
            "rate_bps": self.rate_bps,
            "buffer_bytes": self.buffer_bytes,
            "per": self.per,
            "ber": self.ber,
            "gilbert": self.gilbert.map(|g| g.to_json()),
            "bod": self.bod.map(|b| b.to_json()),
        })
    }
}

/// Which direction(s) a `set` applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    AToB,
    BToA,
    Both,
}

impl Dir {
    pub fn parse(s: &str) -> Option<Dir> {
        match s {
            "a_to_b" => Some(Dir::AToB),
            "b_to_a" => Some(Dir::BToA),
            "both" => Some(Dir::Both),
            _ => None,
        }
    }

    pub fn includes_a_to_b(self) -> bool {
        matches!(self, Dir::AToB | Dir::Both)
    }

    pub fn includes_b_to_a(self) -> bool {
        matches!(self, Dir::BToA | Dir::Both)
    }
}

/// Parses a config file body: `{"a_to_b": {...}, "b_to_a": {...}}` (both optional,
/// each partial over the defaults).
pub fn parse_config(text: &str) -> Result<(LinkParams, LinkParams), String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    let obj = object(&v, "config")?;
    let mut a = LinkParams::default();
    let mut b = LinkParams::default();
    for (k, val) in obj {
        match k.as_str() {
            "a_to_b" => a = a.merged(val, "a_to_b")?,
            "b_to_a" => b = b.merged(val, "b_to_a")?,
            _ => return Err(field_err(k, "unknown field (expected a_to_b, b_to_a)")),
        }
    }
    Ok((a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_round_trip_through_json() {
        let p = LinkParams::default();
        let back = LinkParams::default().merged(&p.to_json(), "").unwrap();
        assert_eq!(p, back);
        let mut q = p.clone();
        q.gilbert = Some(GilbertParams::default());
        q.bod = Some(BodParams::default());
        assert_eq!(q, LinkParams::default().merged(&q.to_json(), "").unwrap());
    }

    #[test]
    fn partial_merge_keeps_other_fields() {
        let p = LinkParams::default()
            .merged(&json!({"delay_ms": 10, "gilbert": {"p_gb": 0.5}}), "")
            .unwrap();
        assert_eq!(p.delay_ms, 10.0);
        assert_eq!(p.rate_bps, 1_536_000);
        let g = p.gilbert.unwrap();
        assert_eq!(g.p_gb, 0.5);
        assert_eq!(g.p_bg, 0.1);
        let p2 = p.merged(&json!({"gilbert": {"p_bg": 0.2}}), "").unwrap();
        assert_eq!(p2.gilbert.unwrap().p_gb, 0.5);
        let off = p2.merged(&json!({"gilbert": null}), "").unwrap();
        assert!(off.gilbert.is_none());
    }

    #[test]
    fn invalid_values_name_the_field() {
        let p = LinkParams::default();
        let cases = [
            (json!({"delay_ms": -1}), "delay_ms"),
            (json!({"jitter_ms": "x"}), "jitter_ms"),
            (json!({"per": 1.5}), "per"),
            (json!({"ber": -0.1}), "ber"),
            (json!({"rate_bps": 1.5}), "rate_bps"),
            (json!({"buffer_bytes": -3}), "buffer_bytes"),
            (json!({"bogus": 1}), "bogus"),
            (json!({"gilbert": {"loss_bad": 2}}), "gilbert.loss_bad"),
            (json!({"gilbert": {"nope": 0}}), "gilbert.nope"),
            (json!({"bod": {"superframe_ms": 0}}), "bod.superframe_ms"),
            (
                json!({"bod": {"granularity_bps": 0}}),
                "bod.granularity_bps",
            ),
            (
                json!({"bod": {"backlog_horizon_ms": -1}}),
                "bod.backlog_horizon_ms",
            ),
            (json!({"bod": 5}), "bod"),
        ];
        for (v, field) in cases {
            let e = p.merged(&v, "").unwrap_err();
            assert!(e.contains(&format!("'{field}'")), "{v}: {e}");
        }
        assert!(p.merged(&json!([1]), "").is_err());
    }

    #[test]
    fn config_file_shape() {
        let (a, b) = parse_config(r#"{"a_to_b":{"delay_ms":5},"b_to_a":{"rate_bps":0}}"#).unwrap();
        assert_eq!(a.delay_ms, 5.0);
        assert_eq!(b.rate_bps, 0);
        assert_eq!(b.delay_ms, 300.0);
        let e = parse_config(r#"{"a_to_b":{"per":3}}"#).unwrap_err();
        assert!(e.contains("a_to_b.per"), "{e}");
        assert!(parse_config("{").unwrap_err().contains("invalid JSON"));
        assert!(parse_config(r#"{"ab":{}}"#).unwrap_err().contains("'ab'"));
    }
}
