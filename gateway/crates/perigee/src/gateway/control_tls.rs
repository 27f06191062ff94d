//! The control protocol across hosts: the same HTTP/1.1 + JSON as the Unix socket, over TCP with
//! mutually authenticated TLS 1.3. The peer must present a certificate issued by the fleet CA
//! (the management API's client certificate); anything else fails the handshake before a request
//! is read. The Unix socket stays the local way in.
use super::control;
use super::state::Shared;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection, StreamOwned};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// Where the listener's identity and the fleet CA live (PEM files).
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// This gateway's certificate chain (leaf first).
    pub cert: String,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: String,
    /// The fleet CA: client certificates must chain to it.
    pub client_ca: String,
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

/// The server side: TLS 1.3 only, a client certificate from the fleet CA required.
pub fn server_config(files: &TlsFiles) -> Result<Arc<ServerConfig>, String> {
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
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
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

pub fn bind(addr: &str) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr)
}

/// One thread per connection, as on the Unix socket: a request takes at most the read timeout
/// to arrive, and a handshake that fails (no or a foreign client certificate) ends the connection.
pub fn serve(shared: Arc<Shared>, listener: TcpListener, config: Arc<ServerConfig>) {
    for conn in listener.incoming() {
        let Ok(tcp) = conn else { continue };
        let s = shared.clone();
        let config = config.clone();
        std::thread::spawn(move || {
            let _ = answer(&s, tcp, config);
        });
    }
}

fn answer(shared: &Shared, tcp: TcpStream, config: Arc<ServerConfig>) -> std::io::Result<()> {
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    tcp.set_write_timeout(Some(Duration::from_secs(10)))?;
    tcp.set_nodelay(true)?;
    let conn = ServerConnection::new(config).map_err(std::io::Error::other)?;
    let mut stream = StreamOwned::new(conn, tcp);
    // Reading drives the handshake: a peer without a fleet certificate errors out here.
    control::answer(shared, &mut stream)?;
    stream.conn.send_close_notify();
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_or_empty_files_are_named_in_the_error() {
        let dir = std::env::temp_dir().join(format!("perigee-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let missing = dir.join("missing.pem").display().to_string();
        let files = |cert: &str| TlsFiles {
            cert: cert.into(),
            key: missing.clone(),
            client_ca: missing.clone(),
        };
        let e = server_config(&files(&missing)).unwrap_err();
        assert!(e.contains("missing.pem"), "{e}");
        let e = server_config(&files(&empty.display().to_string())).unwrap_err();
        assert!(e.contains("no certificate"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
