//! The control socket's HTTP parser (gateway/crates/perigee/src/gateway/http.rs) on any bytes a
//! local client can send: it must answer with a request or an error, never panic, and hold to its
//! limits (line length, header count, body size).
#![no_main]
use libfuzzer_sys::fuzz_target;
use perigee::gateway::http;

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = http::read_request(data) {
        assert!(req.body.len() <= data.len(), "a body longer than the input");
        assert!(req.method.len() <= http::MAX_LINE && req.path.len() <= http::MAX_LINE);
        for (k, _) in &req.query {
            let _ = req.param(k);
        }
    }
});
