//! Config applies on a real `perigee gateway run`: a failed apply keeps the previous state, a
//! daemon started without a config (or with one whose first apply fails) runs degraded and
//! intercepts nothing until a good config is put, and what an apply installs is kept in the
//! `--config` file the next start boots.
mod common;
use common::*;
use perigee_testkit::wait_for;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::{Duration, Instant};

/// /v1/health once it says ok (the workers started on the config just put), or its last answer after HUNG.
fn health_ok(t: &Topo) -> serde_json::Value {
    let deadline = Instant::now() + HUNG;
    loop {
        let (_, h) = control(&t.sock(), "GET", "/v1/health", None).unwrap();
        if h["status"] == "ok" || Instant::now() > deadline {
            return h;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn failed_apply_keeps_previous_state() {
    let Some(_g) = serial() else { return };
    let mut t = Topo::new("ap");
    let cfg = t.config();
    t.start(&cfg);
    let before = run(&[
        "ip", "netns", "exec", &t.g, "nft", "-s", "list", "table", "inet", "perigee",
    ]);
    let mut bad = cfg.clone();
    bad["revision"] = "bad".into();
    bad["served_subnets"] = serde_json::json!(["10.99.1.0/24", "fd99:1::/64", "10.55.0.0/16"]);
    // The gateway is not on-link with this next hop: `ip route` fails after nft applied.
    bad["satellite"]["routes"] = serde_json::json!([{"dst": "10.77.0.0/16", "via": "10.250.0.1"}]);
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&bad)).unwrap();
    assert_eq!(st, 409, "{v}");
    assert_eq!(v["error"]["step"], "routes");
    let after = run(&[
        "ip", "netns", "exec", &t.g, "nft", "-s", "list", "table", "inet", "perigee",
    ]);
    assert_eq!(before, after, "nft ruleset changed by a failed apply");
    let (_, c) = control(&t.sock(), "GET", "/v1/config", None).unwrap();
    assert_eq!(c["revision"], "t1");
    // Invalid configs are refused naming the field, and validate changes nothing.
    bad["satellite"]["routes"] = serde_json::json!([]);
    bad["splitter"]["tproxy_port"] = 70000.into();
    let (st, v) = control(&t.sock(), "POST", "/v1/config/validate", Some(&bad)).unwrap();
    assert_eq!(st, 422);
    assert_eq!(v["error"]["field"], "splitter.tproxy_port");
    // A good apply with an open flow keeps the flow.
    let _rx = server(&t.s, sa(SERVER4, 5001));
    let mut c = connect(&t.c, sa(SERVER4, 5001)).unwrap();
    c.set_read_timeout(Some(HUNG)).unwrap();
    c.write_all(b"WHO\n").unwrap();
    let mut r = BufReader::new(c.try_clone().unwrap());
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let mut good = cfg.clone();
    good["revision"] = "t3".into();
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&good)).unwrap();
    assert_eq!(st, 200, "{v}");
    c.write_all(b"still here\n").unwrap();
    let mut echo = String::new();
    r.read_line(&mut echo).unwrap();
    assert_eq!(echo, "still here\n");
    drop(c);
    // A satellite route over an existing one: restored as it was when the daemon stops.
    run(&[
        "ip",
        "-n",
        &t.g,
        "route",
        "add",
        "10.77.0.0/16",
        "via",
        "10.99.2.10",
    ]);
    good["revision"] = "t4".into();
    good["satellite"]["routes"] = serde_json::json!([{"dst": "10.77.0.0/16", "via": "10.99.2.10"}]);
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&good)).unwrap();
    assert_eq!(st, 200, "{v}");
    let route = run(&["ip", "-n", &t.g, "route", "show", "10.77.0.0/16"]);
    assert!(route.contains("initcwnd 10"), "{route}");
    t.stop();
    let route = run(&["ip", "-n", &t.g, "route", "show", "10.77.0.0/16"]);
    assert!(
        route.contains("via 10.99.2.10") && !route.contains("initcwnd"),
        "{route}"
    );
    assert!(run(&["ip", "netns", "exec", &t.g, "nft", "list", "tables"]).is_empty());
}

/// A config put through the control socket is written to the daemon's `--config` file (its mode
/// kept, as GET /v1/config shows it), a refused one leaves the file alone, and a restarted daemon
/// runs the kept revision: a gateway boots what it last ran.
#[test]
fn an_applied_config_is_kept_and_booted_at_the_next_start() {
    let Some(_g) = serial() else { return };
    let mut t = Topo::new("kp");
    let cfg = t.config();
    t.start(&cfg);
    let file = t.dir.join("gw.json");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let mut next = cfg.clone();
    next["revision"] = "t2".into();
    next["splitter"]["max_flows"] = 4242.into();
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&next)).unwrap();
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        (&v["persisted"], &v["persist_error"]),
        (&true.into(), &serde_json::Value::Null),
        "{v}"
    );
    let (_, running) = control(&t.sock(), "GET", "/v1/config", None).unwrap();
    let kept: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(kept, running, "the file holds the config in force");
    assert_eq!(kept["revision"], "t2");
    assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o7777, 0o640);
    // Refused (invalid) and rolled back (a route step that fails): the file stays as it was.
    let before = std::fs::read(&file).unwrap();
    let mut bad = next.clone();
    bad["revision"] = "bad".into();
    bad["splitter"]["tproxy_port"] = 70000.into();
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&bad)).unwrap();
    assert_eq!(st, 422, "{v}");
    bad["splitter"]["tproxy_port"] = 7071.into();
    bad["satellite"]["routes"] = serde_json::json!([{"dst": "10.77.0.0/16", "via": "10.250.0.1"}]);
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&bad)).unwrap();
    assert_eq!((st, &v["error"]["step"]), (409, &"routes".into()), "{v}");
    assert_eq!(
        std::fs::read(&file).unwrap(),
        before,
        "a refused config changed the file"
    );
    let leftovers: Vec<String> = std::fs::read_dir(&t.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // The next start boots the kept config, not the one the daemon was first started with.
    t.restart();
    let h = health_ok(&t);
    assert_eq!(h["config_revision"], "t2", "{h}\n{}", t.log());
    let (_, after) = control(&t.sock(), "GET", "/v1/config", None).unwrap();
    assert_eq!(after, running);
    assert_eq!(after["splitter"]["max_flows"], 4242);
}

#[test]
fn started_without_a_config_it_intercepts_nothing_until_one_is_put() {
    let Some(_g) = serial() else { return };
    let mut t = Topo::new("nc");
    let good = t.config();
    let child = start_daemon_until(&t.g, &t.dir, "gw", &serde_json::Value::Null, |h| {
        h["status"] == "degraded"
    });
    t.daemon = Some(child);
    let (_, h) = control(&t.sock(), "GET", "/v1/health", None).unwrap();
    assert!(h["config_revision"].is_null() && h["role"].is_null(), "{h}");
    assert!(
        h["problems"].to_string().contains("no config is installed"),
        "{h}"
    );
    let (st, v) = control(&t.sock(), "GET", "/v1/config", None).unwrap();
    assert_eq!((st, v["error"]["code"].as_str()), (404, Some("no_config")));
    let (st, ifs) = control(&t.sock(), "GET", "/v1/interfaces", None).unwrap();
    assert_eq!(st, 200);
    let names: Vec<&str> = ifs["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["name"].as_str())
        .collect();
    assert!(names.contains(&"lan0") && names.contains(&"sat0"), "{ifs}");
    assert!(run(&["ip", "netns", "exec", &t.g, "nft", "list", "tables"]).is_empty());
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&good)).unwrap();
    assert_eq!(st, 200, "{v}");
    let h = health_ok(&t);
    assert_eq!(
        (h["status"].as_str(), h["role"].as_str()),
        (Some("ok"), Some("terminal")),
        "{h}\n{}",
        t.log()
    );
    let (_, ifs) = control(&t.sock(), "GET", "/v1/interfaces", None).unwrap();
    let lan0 = ifs["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "lan0")
        .unwrap()
        .clone();
    assert_eq!(lan0["configured_as"], "lan", "{lan0}");
    assert!(lan0["addresses"].to_string().contains("/24"), "{lan0}");
}

#[test]
fn failed_initial_apply_runs_degraded_until_a_good_config() {
    let Some(_g) = serial() else { return };
    let mut t = Topo::new("ia");
    let good = t.config();
    let mut bad = good.clone();
    bad["revision"] = "bad".into();
    // sat9 does not exist here: the satellite route step of the first apply fails.
    bad["interfaces"]["satellite"] = "sat9".into();
    bad["satellite"]["routes"] = serde_json::json!([{"dst": "10.77.0.0/16", "via": "10.99.2.10"}]);
    let child = start_daemon_until(&t.g, &t.dir, "gw", &bad, |h| h["status"] == "degraded");
    t.daemon = Some(child);
    let (st, h) = control(&t.sock(), "GET", "/v1/health", None).unwrap();
    assert_eq!(st, 200);
    assert_eq!(h["status"], "degraded", "{h}");
    assert!(h["config_revision"].is_null(), "{h}");
    let problems = h["problems"].to_string();
    assert!(problems.contains("initial apply failed"), "{h}");
    assert!(problems.contains("routes"), "{h}");
    assert!(t.daemon.as_mut().unwrap().try_wait().unwrap().is_none());
    // Nothing installed: no table, and connections pass unsplit.
    assert!(run(&["ip", "netns", "exec", &t.g, "nft", "list", "tables"]).is_empty());
    let _rx = server(&t.s, sa(SERVER4, 5001));
    let (local, _, seen) = who(&t, sa(SERVER4, 5001));
    assert_eq!(seen, local.to_string());
    assert!(find_flow(&t, local).is_none());
    // A correct config pushed through the API installs everything and starts the workers.
    let (st, v) = control(&t.sock(), "PUT", "/v1/config", Some(&good)).unwrap();
    assert_eq!(st, 200, "{v}");
    let h = health_ok(&t);
    assert_eq!(h["status"], "ok", "{h}\n{}", t.log());
    assert_eq!(h["config_revision"], "t1");
    // The workers open their listeners once they have the config: a connection made before that
    // passes unsplit, so try until one is split (each listed within a report period, 1 s).
    let (f, _) = wait_for("a flow split after the good config", HUNG, || {
        let (local, _, seen) = who(&t, sa(SERVER4, 5001));
        assert_eq!(seen, local.to_string());
        std::thread::sleep(Duration::from_millis(1200));
        find_flow(&t, local)
    });
    assert_eq!(f["legs"]["satellite"], "server");
}
