//! The control protocol across hosts: the same HTTP/1.1 + JSON as the Unix socket, over TCP with
//! mutually authenticated TLS 1.3. The peer must present a certificate issued by the fleet CA
//! (the management API's client certificate) and not revoked by the fleet CA's revocation list,
//! which the API pushes (`PUT /v1/control-tls/crl`) when a gateway leaves the fleet; anything
//! else fails the handshake before a request is read. The Unix socket stays the local way in.
//!
//! The listener answers at most [`MAX_CONNECTIONS`] connections at once, each within
//! [`REQUEST_DEADLINE`] (handshake and request together): past the bound a new connection is
//! closed at once, so a flood of idle or slow connections costs no thread and no memory beyond
//! the bound.
use super::{atomic_file, log};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection, StreamOwned};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// At most this many connections are answered at once (the API asks a member a handful of
/// things in parallel; anything past this is a flood).
pub const MAX_CONNECTIONS: usize = 32;
/// A connection's handshake and request must arrive within this, however slowly they trickle.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(10);
/// The largest revocation list taken (a fleet revokes a few certificates a year).
pub const MAX_CRL_BYTES: usize = 1 << 20;
/// A kept revocation list is public (the CA's signed list of serial numbers).
const CRL_FILE_MODE: u32 = 0o644;

/// Where the listener's identity and the fleet CA live (PEM files).
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// This gateway's certificate chain (leaf first).
    pub cert: String,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: String,
    /// The fleet CA: client certificates must chain to it.
    pub client_ca: String,
    /// Where a pushed revocation list is kept (read at start, replaced by each push); None keeps
    /// it in memory only, until the next push after a restart.
    pub crl: Option<String>,
}

/// `PUT /v1/control-tls/crl`: the fleet CA's certificate revocation list, PEM.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CrlUpdate {
    #[schemars(length(max = MAX_CRL_BYTES))]
    pub crl_pem: String,
}

/// The answer to `PUT /v1/control-tls/crl`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CrlInstalled {
    pub ok: bool,
    /// Whether this gateway serves the TLS control listener (the list only matters when it does).
    pub listening: bool,
    /// Whether the list was written to `--control-tls-crl` (kept across a restart).
    pub persisted: bool,
}

fn read_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{path}: {e}"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{path}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{path}: no certificate in the file"));
    }
    Ok(certs)
}

fn parse_crl(pem: &[u8]) -> Result<CertificateRevocationListDer<'static>, String> {
    if pem.len() > MAX_CRL_BYTES {
        return Err(format!("over {MAX_CRL_BYTES} bytes"));
    }
    CertificateRevocationListDer::from_pem_slice(pem)
        .map_err(|e| format!("not a PEM X509 CRL: {e}"))
}

/// The server side: TLS 1.3 only, a client certificate from the fleet CA required, and not on
/// `crl` when there is one. rustls-webpki checks the list's signature against the CA.
fn build(
    files: &TlsFiles,
    crl: Option<&CertificateRevocationListDer<'static>>,
) -> Result<Arc<ServerConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = read_certs(&files.cert)?;
    let key =
        PrivateKeyDer::from_pem_file(&files.key).map_err(|e| format!("{}: {e}", files.key))?;
    let mut roots = RootCertStore::empty();
    for ca in read_certs(&files.client_ca)? {
        roots
            .add(ca)
            .map_err(|e| format!("{}: {e}", files.client_ca))?;
    }
    let mut verifier =
        WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
    if let Some(crl) = crl {
        // Only the client's own certificate is checked (the CA is the trust anchor), and a client
        // certificate the list cannot speak for (another issuer) is judged by the chain alone.
        verifier = verifier
            .with_crls([crl.clone()])
            .only_check_end_entity_revocation()
            .allow_unknown_revocation_status();
    }
    let verifier = verifier
        .build()
        .map_err(|e| format!("client verifier: {e}"))?;
    let config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| format!("{} / {}: {e}", files.cert, files.key))?;
    Ok(Arc::new(config))
}

/// The listener's TLS state: the server config in force, replaced whole when a revocation list
/// arrives (connections already answering keep the one they started with).
pub struct ControlTls {
    files: TlsFiles,
    current: Mutex<Arc<ServerConfig>>,
}

impl ControlTls {
    /// Loads the files and the kept revocation list (`files.crl`, when it exists); any of them
    /// unreadable or malformed is an error, so a revoked certificate is never let in by accident.
    pub fn load(files: &TlsFiles) -> Result<Self, String> {
        let crl = match &files.crl {
            Some(path) => match std::fs::read(path) {
                Ok(pem) => Some(parse_crl(&pem).map_err(|e| format!("{path}: {e}"))?),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(format!("{path}: {e}")),
            },
            None => None,
        };
        Ok(ControlTls {
            current: Mutex::new(build(files, crl.as_ref())?),
            files: files.clone(),
        })
    }

    fn config(&self) -> Arc<ServerConfig> {
        self.current.lock().unwrap().clone()
    }

    /// Puts `pem` in force for new connections and keeps it in `files.crl`. A list that does not
    /// parse changes nothing. Returns whether it was kept on disk.
    pub fn install_crl(&self, pem: &[u8]) -> Result<bool, String> {
        let crl = parse_crl(pem)?;
        let config = build(&self.files, Some(&crl))?;
        // In force even when it cannot be kept: a restart then waits for the API's next push.
        let persisted = match &self.files.crl {
            Some(path) => match atomic_file::replace(Path::new(path), pem, CRL_FILE_MODE) {
                Ok(()) => true,
                Err(e) => {
                    log::warn(
                        "cannot keep the pushed revocation list",
                        json!({"path": path, "error": e.to_string()}),
                    );
                    false
                }
            },
            None => false,
        };
        *self.current.lock().unwrap() = config;
        Ok(persisted)
    }

    /// One connection: the handshake and one request within REQUEST_DEADLINE, `handle` answers.
    pub fn answer<F>(&self, tcp: TcpStream, handle: F) -> std::io::Result<()>
    where
        F: FnOnce(&mut StreamOwned<ServerConnection, Deadline>) -> std::io::Result<()>,
    {
        tcp.set_write_timeout(Some(REQUEST_DEADLINE))?;
        tcp.set_nodelay(true)?;
        let conn = ServerConnection::new(self.config()).map_err(std::io::Error::other)?;
        let mut stream = StreamOwned::new(conn, Deadline::new(tcp, REQUEST_DEADLINE));
        // Reading drives the handshake: a peer without a valid fleet certificate errors out here.
        handle(&mut stream)?;
        stream.conn.send_close_notify();
        stream.flush()
    }
}

/// A TCP stream whose reads all end by one deadline: a peer trickling a byte at a time cannot
/// hold a connection slot past it.
pub struct Deadline {
    tcp: TcpStream,
    until: Instant,
}

impl Deadline {
    pub fn new(tcp: TcpStream, within: Duration) -> Self {
        Deadline {
            tcp,
            until: Instant::now() + within,
        }
    }
}

impl Read for Deadline {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        self.tcp.set_read_timeout(Some(left))?;
        // A socket read timeout surfaces as EAGAIN (WouldBlock) on Linux: past the deadline it
        // is the deadline's TimedOut, so callers see one kind for "the peer took too long".
        match self.tcp.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                Err(std::io::ErrorKind::TimedOut.into())
            }
            other => other,
        }
    }
}

impl Write for Deadline {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.tcp.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.tcp.flush()
    }
}

/// Loads the listener's files (master.rs: at start, where a failure is fatal).
pub fn server_config(files: &TlsFiles) -> Result<Arc<ControlTls>, String> {
    ControlTls::load(files).map(Arc::new)
}

pub fn bind(addr: &str) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr)
}

/// The listener in force, for `PUT /v1/control-tls/crl` (one per daemon).
static LISTENER: OnceLock<Arc<ControlTls>> = OnceLock::new();

/// Makes `tls` the daemon's listener (control.rs, when it starts serving on it).
pub fn set_listener(tls: Arc<ControlTls>) {
    let _ = LISTENER.set(tls);
}

/// A thread per connection, at most `max` at once: a connection past the bound is closed as
/// soon as it is accepted (the client sees the connection end and may retry).
pub fn serve_bounded<F>(listener: TcpListener, max: usize, handle: F)
where
    F: Fn(TcpStream) + Send + Sync + 'static,
{
    let handle = Arc::new(handle);
    let busy = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        let Ok(tcp) = conn else { continue };
        if busy.fetch_add(1, Ordering::AcqRel) >= max {
            busy.fetch_sub(1, Ordering::AcqRel);
            drop(tcp);
            continue;
        }
        let slot = Slot(busy.clone());
        let handle = handle.clone();
        let spawned = std::thread::Builder::new().spawn(move || {
            let _slot = slot;
            handle(tcp);
        });
        // No thread to be had: the slot went back when the closure (and the stream) dropped.
        drop(spawned);
    }
}

/// One taken connection slot, given back when the connection's thread ends (however it ends).
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// `PUT /v1/control-tls/crl`: `(status, answer)` for control.rs.
pub fn put_crl(body: &[u8]) -> Result<CrlInstalled, (u16, &'static str, String)> {
    let update: CrlUpdate =
        serde_json::from_slice(body).map_err(|e| (422, "invalid_crl", format!("body: {e}")))?;
    let Some(tls) = LISTENER.get() else {
        // Nothing to protect here; the list is checked so a bad one is still refused.
        parse_crl(update.crl_pem.as_bytes()).map_err(|e| (422, "invalid_crl", e))?;
        return Ok(CrlInstalled {
            ok: true,
            listening: false,
            persisted: false,
        });
    };
    let persisted = tls
        .install_crl(update.crl_pem.as_bytes())
        .map_err(|e| (422, "invalid_crl", e))?;
    Ok(CrlInstalled {
        ok: true,
        listening: true,
        persisted,
    })
}

#[cfg(test)]
mod tests;
