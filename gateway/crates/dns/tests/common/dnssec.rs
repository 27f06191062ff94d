//! Signed zones for the DNSSEC tests: keys and signatures by ldns-keygen and ldns-signzone
//! (ldnsutils), served by NSD on the upstream's port 53.

use super::{in_ns, UPSTREAM};
use perigee_testkit::dns::{query, TYPE_A};
use perigee_testkit::run;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Only a hung NSD takes this long to start.
const START_HUNG: Duration = Duration::from_secs(30);

fn upstream53() -> SocketAddr {
    format!("{UPSTREAM}:53").parse().unwrap()
}

/// The file a zone is written to in `dir` (`.` is the root).
fn zone_file(dir: &Path, zone: &str, ext: &str) -> PathBuf {
    let stem = if zone == "." { "root" } else { zone };
    dir.join(format!("{stem}.{ext}"))
}

/// `zone` with an SOA, `ns.<zone>` (at the upstream's address) as its NS, and `body` (records,
/// names relative to the zone), unsigned. Returns its file.
pub fn write_zone(dir: &Path, zone: &str, body: &str) -> PathBuf {
    let origin = if zone == "." {
        ".".to_string()
    } else {
        format!("{zone}.")
    };
    let file = zone_file(dir, zone, "zone");
    std::fs::write(
        &file,
        format!(
            "$ORIGIN {origin}\n$TTL 3600\n@ IN SOA ns hostmaster 1 3600 600 86400 300\n@ IN NS ns\n\
             ns IN A {UPSTREAM}\n{body}"
        ),
    )
    .unwrap();
    file
}

/// `write_zone`, signed with a fresh Ed25519 key (NSEC3). Returns the signed file and the key's
/// DS record (for the parent zone, or as a trust anchor).
pub fn signed_zone(dir: &Path, zone: &str, body: &str) -> (PathBuf, String) {
    let unsigned = write_zone(dir, zone, body);
    let keygen = Command::new("ldns-keygen")
        .args(["-a", "ED25519", "-k", zone])
        .current_dir(dir)
        .output()
        .expect("ldns-keygen (scripts/apt/gateway.txt installs ldnsutils)");
    assert!(keygen.status.success(), "{keygen:?}");
    let key = String::from_utf8(keygen.stdout).unwrap().trim().to_string();
    let signed = zone_file(dir, zone, "signed");
    run(&[
        "ldns-signzone",
        "-n",
        "-f",
        &signed.to_string_lossy(),
        &unsigned.to_string_lossy(),
        &dir.join(&key).to_string_lossy(),
    ]);
    let ds = std::fs::read_to_string(dir.join(format!("{key}.ds"))).unwrap();
    (signed, ds.trim().to_string())
}

/// Changes the address of `owner`'s A record in a signed zone file after signing, so its
/// signature no longer matches (a forgery on the way).
pub fn forge_address(file: &Path, owner: &str, from: &str, to: &str) {
    let text = std::fs::read_to_string(file).unwrap();
    let mut replaced = 0;
    let forged: Vec<String> = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() == 5 && f[0] == owner && f[3] == "A" && f[4] == from {
                replaced += 1;
                l.replace(from, to)
            } else {
                l.to_string()
            }
        })
        .collect();
    assert_eq!(replaced, 1, "{owner} A {from} in {text}");
    std::fs::write(file, forged.join("\n") + "\n").unwrap();
}

/// NSD serving `zones` (name, file) on the upstream's port 53 in namespace `ns`; killed on drop.
pub struct Nsd(Child);

impl Nsd {
    pub fn start(ns: &str, dir: &Path, zones: &[(&str, &Path)]) -> Nsd {
        let d = dir.display();
        let mut conf = format!(
            "server:\n ip-address: {UPSTREAM}\n port: 53\n server-count: 1\n username: \"\"\n \
             chroot: \"\"\n database: \"\"\n zonesdir: \"{d}\"\n zonelistfile: \"{d}/zone.list\"\n \
             xfrdfile: \"{d}/xfrd.state\"\n xfrdir: \"{d}\"\n pidfile: \"{d}/nsd.pid\"\n \
             logfile: \"{d}/nsd.log\"\nremote-control:\n control-enable: no\n"
        );
        for (zone, file) in zones {
            conf += &format!(
                "zone:\n name: \"{zone}\"\n zonefile: \"{}\"\n",
                file.display()
            );
        }
        let conf_file = dir.join("nsd.conf");
        std::fs::write(&conf_file, conf).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "nsd", "-d", "-c"])
            .arg(&conf_file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nsd (scripts/apt/gateway.txt installs it)");
        let nsd = Nsd(child);
        // Serving once it answers for the first zone's name server.
        let probe = format!("ns.{}", zones[0].0).replace("..", ".");
        let deadline = Instant::now() + START_HUNG;
        let ns = ns.to_string();
        loop {
            let probe = probe.clone();
            let answered = in_ns(&ns, move || {
                query(
                    upstream53(),
                    &probe,
                    TYPE_A,
                    false,
                    Duration::from_millis(300),
                )
                .is_ok()
            });
            if answered {
                return nsd;
            }
            let log = std::fs::read_to_string(dir.join("nsd.log")).unwrap_or_default();
            assert!(Instant::now() < deadline, "nsd did not start: {log}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Nsd {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
