//! The peer path's TLS settings (rustls, ring): TLS 1.3 only, mutual authentication by pinned
//! keys (`pin`), no session tickets or resumption (every connection has a full handshake with
//! fresh ephemeral keys from both sides: forward secrecy, and nothing a recorded handshake can
//! replay), and an ALPN name that carries the peer protocol's version.
use super::identity::{Fingerprint, Identity};
use super::pin::{PinnedHub, PinnedTerminals};
use rustls::{ClientConfig, ServerConfig};
use std::sync::Arc;

/// The peer protocol inside TLS (docs/splitter.md, *Protocol*); another version fails the
/// handshake with `no_application_protocol` instead of misreading frames.
pub const ALPN: &[u8] = b"perigee-peer/2";

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A terminal's side: present `id`, accept only a hub whose key is one of `hub_pins`.
pub fn client_config(id: &Identity, hub_pins: &[Fingerprint]) -> Result<Arc<ClientConfig>, String> {
    let mut c = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PinnedHub::new(hub_pins.iter().cloned())))
        .with_client_auth_cert(vec![id.cert.clone()], id.key.clone_key())
        .map_err(|e| format!("the peer identity: {e}"))?;
    c.alpn_protocols = vec![ALPN.to_vec()];
    c.resumption = rustls::client::Resumption::disabled();
    Ok(Arc::new(c))
}

/// The hub's side: present `id`, accept only enrolled terminals' keys.
pub fn server_config(
    id: &Identity,
    terminal_pins: impl IntoIterator<Item = Fingerprint>,
) -> Result<Arc<ServerConfig>, String> {
    let mut c = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(Arc::new(PinnedTerminals::new(terminal_pins)))
        .with_single_cert(vec![id.cert.clone()], id.key.clone_key())
        .map_err(|e| format!("the peer identity: {e}"))?;
    c.alpn_protocols = vec![ALPN.to_vec()];
    c.send_tls13_tickets = 0;
    c.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    Ok(Arc::new(c))
}

/// The server name a terminal's handshake carries: the hub's address, which rustls does not
/// send as SNI (nothing names either gateway in clear).
pub fn server_name(hub: std::net::IpAddr) -> rustls::pki_types::ServerName<'static> {
    rustls::pki_types::ServerName::IpAddress(hub.into())
}
