//! The binary end to end on loopback: its echo server answers its rate client, and a rate run
//! against a closed port reports refused connections instead of successes.
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const EXE: &str = env!("CARGO_BIN_EXE_perigee-loadgen");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn rate(port: u16, max_conns: u32, duration: &str) -> serde_json::Value {
    let out = Command::new(EXE)
        .args([
            "rate",
            "--connect",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ])
        .args([
            "--threads",
            "2",
            "--concurrency",
            "8",
            "--duration",
            duration,
        ])
        .args(["--max-conns", &max_conns.to_string(), "--drain", "2"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn echo_and_rate_on_loopback() {
    let port = free_port();
    let mut srv = Command::new(EXE)
        .args([
            "echo",
            "--bind",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--threads",
            "2",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(srv.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "LISTENING");
    // A long window: the run ends when the 400 are done, well inside it, so it is capped.
    let r = rate(port, 400, "10");
    srv.kill().unwrap();
    srv.wait().unwrap();
    assert_eq!(r["errors"], 0, "{r}");
    assert_eq!(r["completed"], 400, "{r}");
    assert_eq!(r["unfinished"], 0);
    assert_eq!(r["capped"], true, "{r}");
    assert!(r["completed_in_window"].as_u64().unwrap() > 0);
    assert!(r["latency_p50_us"].as_u64().unwrap() <= r["latency_p99_us"].as_u64().unwrap());
}

#[test]
fn refused_connections_are_errors() {
    let r = rate(free_port(), 50, "0.5");
    assert_eq!(r["completed"], 0, "{r}");
    assert_eq!(r["errors"], 50, "{r}");
    assert_eq!(r["error_kinds"]["ECONNREFUSED"], 50, "{r}");
    assert!(r["latency_p50_us"].is_null());
}
