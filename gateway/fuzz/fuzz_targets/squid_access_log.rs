//! The Squid access-log parser (perigee-squid access_log.rs) on any line: Squid writes it, but
//! its URL and host fields carry whatever clients sent.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let line = String::from_utf8_lossy(data);
    if let Ok(rec) = perigee_squid::parse_access_line(&line) {
        assert!(rec.ts.is_finite(), "a record with a non-finite time");
        let _ = serde_json::to_string(&rec).expect("a parsed record serialises");
    }
});
