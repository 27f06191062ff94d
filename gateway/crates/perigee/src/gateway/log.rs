//! Structured logs: one JSON object per line on stderr.
use serde_json::{json, Value};
use std::io::Write;

pub fn log(level: &str, msg: &str, fields: Value) {
    let mut line =
        json!({"ts": super::sys::now_f64(), "level": level, "msg": msg, "pid": std::process::id()});
    if let (Some(obj), Value::Object(extra)) = (line.as_object_mut(), fields) {
        obj.extend(extra);
    }
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

pub fn info(msg: &str, fields: Value) {
    log("info", msg, fields)
}

pub fn warn(msg: &str, fields: Value) {
    log("warn", msg, fields)
}

pub fn error(msg: &str, fields: Value) {
    log("error", msg, fields)
}
