//! CLI subcommands: the daemon (`gateway run`, internal `gateway worker`) and the control-socket
//! clients (`flows`, `config`, `health`, `counters`).
use super::{config, control_tls, http, master, worker};
use clap::{Args, Subcommand};
use serde_json::Value;
use std::io::Write;

pub const DEFAULT_SOCKET: &str = "/run/perigee/control.sock";

#[derive(Args)]
pub struct SocketArg {
    /// Control socket of the running daemon.
    #[arg(long, global = true, env = "PERIGEE_CONTROL_SOCKET", default_value = DEFAULT_SOCKET)]
    pub control_socket: String,
}

/// Where the daemon's Squid lives (docs/cache.md); two gateways on one host need their own.
#[derive(Args)]
pub struct SquidArgs {
    /// Squid binary.
    #[arg(long, default_value = "squid")]
    pub squid_bin: String,
    /// squid.conf, cache store and logs.
    #[arg(long, default_value = "/var/lib/perigee/squid")]
    pub squid_state_dir: String,
    /// Squid's pid file.
    #[arg(long, default_value = "/run/perigee/squid")]
    pub squid_run_dir: String,
    /// Squid's `-n` service name (shared memory and IPC socket names).
    #[arg(long, default_value = "perigee")]
    pub squid_service: String,
}

impl SquidArgs {
    pub fn options(self) -> perigee_squid::ManagerOptions {
        perigee_squid::ManagerOptions {
            squid_bin: self.squid_bin.into(),
            paths: perigee_squid::SquidPaths {
                state_dir: self.squid_state_dir.into(),
                run_dir: self.squid_run_dir.into(),
                service_name: self.squid_service,
                ..perigee_squid::SquidPaths::default()
            },
            ..perigee_squid::ManagerOptions::default()
        }
    }
}

/// Where the daemon's resolver lives (docs/dns.md); two gateways on one host need their own.
#[derive(Args)]
pub struct DnsArgs {
    /// unbound binary.
    #[arg(long, default_value = "unbound")]
    pub unbound_bin: String,
    /// unbound-checkconf binary (checks every rendered unbound.conf before it is used).
    #[arg(long, default_value = "unbound-checkconf")]
    pub unbound_checkconf_bin: String,
    /// unbound-control binary (stats, cache dump/load, flush, stop).
    #[arg(long, default_value = "unbound-control")]
    pub unbound_control_bin: String,
    /// unbound.conf and unbound.log.
    #[arg(long, default_value = "/var/lib/perigee/dns")]
    pub dns_state_dir: String,
    /// unbound's pid file and control socket.
    #[arg(long, default_value = "/run/perigee/dns")]
    pub dns_run_dir: String,
    /// The user unbound drops to once its sockets are open.
    #[arg(long, default_value = perigee_dns::render::DEFAULT_USER)]
    pub dns_user: String,
    /// DNSSEC trust anchors (zone-file DS or DNSKEY records, e.g. Debian's
    /// /usr/share/dns/root.ds) instead of the built-in root anchors.
    #[arg(long)]
    pub dns_trust_anchor_file: Option<String>,
}

impl DnsArgs {
    pub fn options(self) -> perigee_dns::ManagerOptions {
        perigee_dns::ManagerOptions {
            unbound_bin: self.unbound_bin.into(),
            checkconf_bin: self.unbound_checkconf_bin.into(),
            control_bin: self.unbound_control_bin.into(),
            paths: perigee_dns::UnboundPaths {
                state_dir: self.dns_state_dir.into(),
                run_dir: self.dns_run_dir.into(),
                user: self.dns_user,
                trust_anchor_file: self.dns_trust_anchor_file.map(Into::into),
            },
            ..perigee_dns::ManagerOptions::default()
        }
    }
}

/// The control protocol over TCP with mutual TLS (fleet management across hosts; docs/cluster.md).
#[derive(Args)]
pub struct ControlTlsArgs {
    /// Also serve the control protocol on this TCP address with mutual TLS. Needs the three
    /// --control-tls-* files.
    #[arg(long, requires_all = ["control_tls_cert", "control_tls_key", "control_tls_ca"])]
    control_tls_listen: Option<String>,
    /// This gateway's certificate (PEM, leaf first), issued by the fleet CA.
    #[arg(long, requires = "control_tls_listen")]
    control_tls_cert: Option<String>,
    /// Its private key (PEM).
    #[arg(long, requires = "control_tls_listen")]
    control_tls_key: Option<String>,
    /// The fleet CA (PEM): clients must present a certificate it issued.
    #[arg(long, requires = "control_tls_listen")]
    control_tls_ca: Option<String>,
    /// Where the fleet CA's revocation list that the API pushes is kept (read at start; a
    /// client certificate on it is refused). Without it the list is kept in memory only.
    #[arg(long, requires = "control_tls_listen")]
    control_tls_crl: Option<String>,
}

impl ControlTlsArgs {
    fn listen(self) -> Option<(String, control_tls::TlsFiles)> {
        let listen = self.control_tls_listen?;
        Some((
            listen,
            control_tls::TlsFiles {
                cert: self.control_tls_cert.unwrap_or_default(),
                key: self.control_tls_key.unwrap_or_default(),
                client_ca: self.control_tls_ca.unwrap_or_default(),
                crl: self.control_tls_crl,
            },
        ))
    }
}

#[derive(Subcommand)]
pub enum GatewayCmd {
    /// Run the splitter daemon (master + workers) in the foreground.
    Run {
        /// The config to start with; without it the daemon intercepts nothing until a config is
        /// PUT on its control socket (a new box, set up from the dashboard).
        #[arg(long)]
        config: Option<String>,
        #[arg(long, default_value = DEFAULT_SOCKET)]
        control_socket: String,
        /// Worker processes sharing the TPROXY port (each holds at most ~20,000 fds).
        #[arg(long, default_value_t = 4)]
        workers: usize,
        /// Prometheus listener (address:port); "off" disables it.
        #[arg(long, env = "PERIGEE_METRICS", default_value = "127.0.0.1:9464")]
        metrics: String,
        /// Boxed for the same reason as `dns`.
        #[command(flatten)]
        control_tls: Box<ControlTlsArgs>,
        #[command(flatten)]
        squid: Box<SquidArgs>,
        /// Boxed: the daemon's options would make every other command as large.
        #[command(flatten)]
        dns: Box<DnsArgs>,
        /// The directory of the FRR vty sockets (bgpd.vty, bfdd.vty) whose BGP and BFD sessions
        /// GET /v1/routing reports; without FRR there the report says it is not available.
        #[arg(long, env = "PERIGEE_FRR_VTY_DIR", default_value = super::routing::DEFAULT_VTY_DIR)]
        frr_vty_dir: String,
        /// The peer path's identity (key and certificate, made here on first start; mode 0700).
        #[arg(long, default_value = super::peer_state::DEFAULT_STATE_DIR)]
        peer_state_dir: String,
    },
    /// Internal: one relay worker (spawned by `run`; stdin/stdout is its master link).
    #[command(hide = true)]
    Worker {
        #[arg(long)]
        index: u32,
        #[arg(long, default_value_t = 0)]
        generation: u32,
        /// The master's pid: the worker exits when its parent is no longer this process
        /// (comparing with 1 is wrong in a container, where the master is PID 1).
        #[arg(long)]
        master_pid: Option<i32>,
    },
}

/// `perigee identity`: this gateway's key on the peer path (docs/splitter.md, *Identities*).
#[derive(Subcommand)]
pub enum IdentityCmd {
    /// Print the fingerprint, the certificate and a staged next fingerprint (GET /v1/identity).
    Show,
    /// Stage a new identity; the other gateway enrolls its fingerprint before `commit`.
    Rotate,
    /// Put the staged identity in use for new peer connections (live flows keep theirs).
    Commit,
    /// Without a daemon: make the identity in DIR if it has none, and print it (provisioning).
    Init {
        #[arg(long, default_value = super::peer_state::DEFAULT_STATE_DIR)]
        state_dir: String,
    },
}

pub fn identity_cmd(sock: &SocketArg, cmd: IdentityCmd) -> i32 {
    let s = sock.control_socket.as_str();
    let r = match cmd {
        IdentityCmd::Show => call(s, "GET", "/v1/identity", None),
        IdentityCmd::Rotate => call(s, "POST", "/v1/identity/rotate", None),
        IdentityCmd::Commit => call(s, "POST", "/v1/identity/commit", None),
        IdentityCmd::Init { state_dir } => {
            match super::peer::identity::IdentityStore::open(std::path::Path::new(&state_dir)) {
                Ok(store) => Ok(serde_json::json!({
                    "fingerprint": store.current().fingerprint.to_string(),
                    "certificate_pem": store.current().certificate_pem(),
                    "next_fingerprint": store.next().map(|n| n.fingerprint.to_string()),
                })),
                Err(e) => {
                    eprintln!("perigee: {e}");
                    Err(2)
                }
            }
        }
    };
    r.map(|v| print(&v)).unwrap_or_else(|c| c)
}

#[derive(Subcommand)]
pub enum ConfigCmd {
    /// Print the active configuration.
    Get,
    /// Validate FILE on the daemon and print what it renders (changes nothing).
    Validate { file: String },
    /// Apply FILE atomically.
    Apply { file: String },
    /// Validate FILE locally, without a daemon.
    Check {
        file: String,
        /// Print the config as the daemon would run it (every default written out, values in
        /// their canonical form: what GET /v1/config answers) instead of `{"ok": true}`.
        #[arg(long)]
        canonical: bool,
    },
    /// Print an example configuration (a terminal; documentation addresses, RFC 5737 and RFC 3849).
    Example,
}

pub fn gateway(cmd: GatewayCmd) -> i32 {
    match cmd {
        GatewayCmd::Run {
            config,
            control_socket,
            workers,
            metrics,
            control_tls,
            squid,
            dns,
            frr_vty_dir,
            peer_state_dir,
        } => master::run(master::RunArgs {
            config,
            control_socket,
            control_tls: control_tls.listen(),
            workers,
            metrics: (metrics != "off").then_some(metrics),
            squid: (*squid).options(),
            dns: (*dns).options(),
            frr_vty_dir: frr_vty_dir.into(),
            peer_state_dir: peer_state_dir.into(),
        }),
        GatewayCmd::Worker {
            index,
            generation,
            master_pid,
        } => {
            // The master blocks SIGTERM/SIGINT for its sigwait thread; workers take the defaults.
            perigee_netsys::signals::TermSignals::unblock();
            worker::main(index, generation, master_pid)
        }
    }
}

fn call(socket: &str, method: &str, path: &str, body: Option<&Value>) -> Result<Value, i32> {
    match http::request(socket, method, path, body) {
        Ok((200, v)) => Ok(v),
        Ok((status, v)) => {
            eprintln!(
                "perigee: {status}: {}",
                serde_json::to_string_pretty(&v).unwrap_or_default()
            );
            Err(1)
        }
        Err(e) => {
            eprintln!("perigee: cannot reach {socket}: {e}");
            Err(2)
        }
    }
}

fn print(v: &Value) -> i32 {
    // A closed pipe (`| head`) is not an error worth a panic.
    let _ = writeln!(
        std::io::stdout(),
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_default()
    );
    0
}

fn read_json(file: &str) -> Result<Value, i32> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        eprintln!("perigee: {file}: {e}");
        2
    })?;
    serde_json::from_str(&text).map_err(|e| {
        eprintln!("perigee: {file}: {e}");
        2
    })
}

pub fn config_cmd(sock: &SocketArg, cmd: ConfigCmd) -> i32 {
    let s = sock.control_socket.as_str();
    let r = match cmd {
        ConfigCmd::Example => Ok(config::example_json()),
        ConfigCmd::Get => call(s, "GET", "/v1/config", None),
        ConfigCmd::Validate { file } => {
            read_json(&file).and_then(|v| call(s, "POST", "/v1/config/validate", Some(&v)))
        }
        ConfigCmd::Apply { file } => read_json(&file)
            .and_then(|v| call(s, "PUT", "/v1/config", Some(&v)))
            .inspect(warn_unless_persisted),
        ConfigCmd::Check { file, canonical } => {
            read_json(&file).and_then(|v| match config::from_value(v) {
                Ok(cfg) if canonical => Ok(serde_json::to_value(&cfg).unwrap_or_default()),
                Ok(_) => Ok(serde_json::json!({"ok": true})),
                Err(e) => {
                    eprintln!("perigee: invalid config: {e}");
                    Err(1)
                }
            })
        }
    };
    r.map(|v| print(&v)).unwrap_or_else(|c| c)
}

/// `perigee config apply`: the apply stands (exit 0), but a config the daemon could not keep in
/// its `--config` file is gone at its next start, which the operator must hear.
fn warn_unless_persisted(applied: &Value) {
    if applied["persisted"] == Value::Bool(false) {
        eprintln!(
            "perigee: applied, but not kept for the next start: {}",
            applied["persist_error"]
                .as_str()
                .unwrap_or("no reason given")
        );
    }
}

/// `perigee health`: prints /v1/health; exits 0 only when the gateway is ok and intercepting,
/// 1 when it is degraded or failed open (new connections pass unsplit), 2 when unreachable,
/// so a container health check means something.
pub fn health(sock: &SocketArg) -> i32 {
    match call(&sock.control_socket, "GET", "/v1/health", None) {
        Ok(v) => {
            print(&v);
            health_exit_code(&v)
        }
        Err(c) => c,
    }
}

fn health_exit_code(v: &Value) -> i32 {
    let ok = v["status"].as_str() == Some("ok") && v["fail_open"].as_bool() == Some(false);
    if ok {
        0
    } else {
        1
    }
}

pub fn simple(sock: &SocketArg, path: &str) -> i32 {
    call(&sock.control_socket, "GET", path, None)
        .map(|v| print(&v))
        .unwrap_or_else(|c| c)
}

pub fn flows(sock: &SocketArg, json: bool, state: &str) -> i32 {
    let v = match call(
        &sock.control_socket,
        "GET",
        &format!("/v1/flows?state={state}"),
        None,
    ) {
        Ok(v) => v,
        Err(c) => return c,
    };
    if json {
        return print(&v);
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{:>16} {:<11} {:<10} {:<28} {:<28} {:>12} {:>12} {:<8} {:>9}",
        "id", "state", "class", "client", "server", "bytes_up", "bytes_down", "sat_cc", "sat_srtt"
    );
    for f in v["flows"].as_array().cloned().unwrap_or_default() {
        let sat = f["legs"]["satellite"]
            .as_str()
            .unwrap_or("server")
            .to_string();
        let leg = &f["legs"][sat.as_str()];
        let _ = writeln!(
            out,
            "{:>16} {:<11} {:<10} {:<28} {:<28} {:>12} {:>12} {:<8} {:>7}ms",
            f["id"].as_u64().unwrap_or(0),
            f["state"].as_str().unwrap_or(""),
            f["class"].as_str().unwrap_or(""),
            f["client"].as_str().unwrap_or(""),
            f["server"].as_str().unwrap_or(""),
            f["bytes_up"].as_u64().unwrap_or(0),
            f["bytes_down"].as_u64().unwrap_or(0),
            leg["cc"].as_str().unwrap_or(""),
            leg["srtt_us"].as_u64().unwrap_or(0) / 1000
        );
    }
    0
}

#[cfg(test)]
mod tests {
    use super::health_exit_code;
    use serde_json::json;

    #[test]
    fn health_fails_when_degraded_or_open() {
        assert_eq!(
            health_exit_code(&json!({"status": "ok", "fail_open": false})),
            0
        );
        assert_eq!(
            health_exit_code(&json!({"status": "degraded", "fail_open": false})),
            1
        );
        assert_eq!(
            health_exit_code(&json!({"status": "ok", "fail_open": true})),
            1
        );
        assert_eq!(health_exit_code(&json!({})), 1);
    }
}
