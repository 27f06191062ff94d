//! Certificate pinning for the peer path's TLS: each side accepts exactly the other's enrolled
//! public keys (their fingerprints), and nothing else about a certificate (issuer, names, dates)
//! matters. The handshake signatures are still verified by rustls (ring's algorithms,
//! `verify_tls13_signature`): these verifiers only decide whose key is acceptable.
use super::identity::Fingerprint;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls13_signature, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, Error, SignatureScheme};
use std::collections::HashSet;

/// The keys one side accepts, and the signature checks both verifiers share (rustls's own).
#[derive(Debug)]
struct Pins {
    pins: HashSet<Fingerprint>,
    algs: WebPkiSupportedAlgorithms,
}

impl Pins {
    fn new(pins: impl IntoIterator<Item = Fingerprint>) -> Pins {
        Pins {
            pins: pins.into_iter().collect(),
            algs: rustls::crypto::ring::default_provider().signature_verification_algorithms,
        }
    }

    /// Whether `cert`'s key is one of the pins (a certificate that does not parse is refused too).
    fn check(&self, cert: &CertificateDer<'_>) -> Result<(), Error> {
        match Fingerprint::of_cert(cert) {
            Ok(f) if self.pins.contains(&f) => Ok(()),
            Ok(_) => Err(Error::InvalidCertificate(CertificateError::UnknownIssuer)),
            Err(_) => Err(Error::InvalidCertificate(CertificateError::BadEncoding)),
        }
    }

    /// TLS 1.3 only (the configs allow nothing else).
    fn tls12(&self) -> Result<HandshakeSignatureValid, Error> {
        Err(Error::PeerIncompatible(
            rustls::PeerIncompatible::Tls12NotOffered,
        ))
    }

    fn tls13(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(message, cert, dss, &self.algs)
    }

    fn schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}

/// The terminal's check of its hub: the hub's key must be one of `peer.hub_fingerprints`.
#[derive(Debug)]
pub struct PinnedHub(Pins);

impl PinnedHub {
    pub fn new(pins: impl IntoIterator<Item = Fingerprint>) -> PinnedHub {
        PinnedHub(Pins::new(pins))
    }
}

impl ServerCertVerifier for PinnedHub {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        self.0
            .check(end_entity)
            .map(|_| ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.tls12()
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.tls13(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.schemes()
    }
}

/// The hub's check of a terminal: its key must be enrolled (`peer.terminals[].fingerprints`).
/// Which terminal it is, the hub reads from the handshake's certificate afterwards.
#[derive(Debug)]
pub struct PinnedTerminals(Pins);

impl PinnedTerminals {
    pub fn new(pins: impl IntoIterator<Item = Fingerprint>) -> PinnedTerminals {
        PinnedTerminals(Pins::new(pins))
    }
}

impl ClientCertVerifier for PinnedTerminals {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        self.0
            .check(end_entity)
            .map(|_| ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.tls12()
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.tls13(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.schemes()
    }
}
