//! This gateway's own identity on the peer path (docs/splitter.md, *The peer path*): a key pair
//! and a self-signed certificate made here on first start, kept in the peer state directory and
//! never sent anywhere but in a TLS handshake. The other gateway pins its fingerprint: the
//! SHA-256 of the certificate's SubjectPublicKeyInfo, so a certificate re-issued for the same key
//! keeps it.
//!
//! Files (one PEM each, certificate then private key, mode 0600, written atomically):
//! `identity.pem` the identity in use, `next.pem` a staged one (`rotate`) that `commit` puts in
//! its place. Keys are ECDSA P-256, made by rcgen with ring.
use super::super::config::check_fingerprint;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub const CURRENT_FILE: &str = "identity.pem";
pub const NEXT_FILE: &str = "next.pem";
/// The name in the certificate (nothing checks it: the peer pins the key).
const CERT_NAME: &str = "perigee-peer";

/// `sha256:` and 64 lowercase hex digits of the SHA-256 of a SubjectPublicKeyInfo.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Fingerprint(String);

pub const FINGERPRINT_PREFIX: &str = "sha256:";

impl Fingerprint {
    pub fn of_spki(spki_der: &[u8]) -> Fingerprint {
        let digest = Sha256::digest(spki_der);
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        Fingerprint(format!("{FINGERPRINT_PREFIX}{hex}"))
    }

    /// The fingerprint of a certificate's public key (Err: not an X.509 certificate).
    pub fn of_cert(cert: &CertificateDer<'_>) -> Result<Fingerprint, String> {
        let ee = webpki::EndEntityCert::try_from(cert).map_err(|e| e.to_string())?;
        Ok(Fingerprint::of_spki(ee.subject_public_key_info().as_ref()))
    }

    /// A fingerprint as written in config (`sha256:` + 64 lowercase hex digits).
    pub fn parse(s: &str) -> Result<Fingerprint, String> {
        check_fingerprint(s)?;
        Ok(Fingerprint(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A certificate and its private key, as rustls takes them.
pub struct Identity {
    pub cert: CertificateDer<'static>,
    pub key: PrivateKeyDer<'static>,
    pub fingerprint: Fingerprint,
}

impl Clone for Identity {
    fn clone(&self) -> Self {
        Identity {
            cert: self.cert.clone(),
            key: self.key.clone_key(),
            fingerprint: self.fingerprint.clone(),
        }
    }
}

impl fmt::Debug for Identity {
    // Never the key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// A new key pair and its self-signed certificate.
    pub fn generate() -> Result<Identity, String> {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .map_err(|e| format!("generating a key: {e}"))?;
        let cert = rcgen::CertificateParams::new(vec![CERT_NAME.to_string()])
            .and_then(|p| p.self_signed(&key))
            .map_err(|e| format!("making the certificate: {e}"))?;
        Identity::from_pem(&format!("{}{}", cert.pem(), key.serialize_pem()))
    }

    /// A PEM with the certificate and the private key.
    pub fn from_pem(pem: &str) -> Result<Identity, String> {
        let cert = CertificateDer::pem_slice_iter(pem.as_bytes())
            .next()
            .ok_or("no certificate in it")?
            .map_err(|e| e.to_string())?;
        let key = PrivateKeyDer::from_pem_slice(pem.as_bytes()).map_err(|e| e.to_string())?;
        let fingerprint = Fingerprint::of_cert(&cert)?;
        Ok(Identity {
            cert,
            key,
            fingerprint,
        })
    }

    /// The certificate as PEM (what GET /v1/identity shows; never the key).
    pub fn certificate_pem(&self) -> String {
        pem_block("CERTIFICATE", self.cert.as_ref())
    }

    fn to_pem(&self) -> String {
        let label = match &self.key {
            PrivateKeyDer::Pkcs1(_) => "RSA PRIVATE KEY",
            PrivateKeyDer::Sec1(_) => "EC PRIVATE KEY",
            _ => "PRIVATE KEY",
        };
        format!(
            "{}{}",
            self.certificate_pem(),
            pem_block(label, self.key.secret_der())
        )
    }

    pub fn load(path: &Path) -> Result<Identity, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Identity::from_pem(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Written to a temporary file (0600) and renamed over `path`: a reader sees the old file or
    /// the new one, never half of one.
    fn save(&self, path: &Path) -> Result<(), String> {
        let tmp = path.with_extension("pem.tmp");
        let err = |e: std::io::Error| format!("{}: {e}", tmp.display());
        let _ = std::fs::remove_file(&tmp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(err)?;
        f.write_all(self.to_pem().as_bytes()).map_err(err)?;
        f.sync_all().map_err(err)?;
        std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
    }
}

fn pem_block(label: &str, der: &[u8]) -> String {
    pem::encode_config(
        &pem::Pem::new(label, der),
        pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
    )
}

/// The identity files of one gateway: the one in use and a staged next one.
pub struct IdentityStore {
    dir: PathBuf,
    current: Arc<Identity>,
    next: Option<Arc<Identity>>,
}

impl IdentityStore {
    /// Load the identity in `dir`, making the directory (0700) and a new identity on first start.
    pub fn open(dir: &Path) -> Result<IdentityStore, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = dir.join(CURRENT_FILE);
        let current = if path.exists() {
            Identity::load(&path)?
        } else {
            let id = Identity::generate()?;
            id.save(&path)?;
            id
        };
        let next_path = dir.join(NEXT_FILE);
        let next = if next_path.exists() {
            Some(Arc::new(Identity::load(&next_path)?))
        } else {
            None
        };
        Ok(IdentityStore {
            dir: dir.to_path_buf(),
            current: Arc::new(current),
            next,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file the identity in use is read from (workers load it themselves).
    pub fn current_path(&self) -> PathBuf {
        self.dir.join(CURRENT_FILE)
    }

    pub fn current(&self) -> Arc<Identity> {
        self.current.clone()
    }

    pub fn next(&self) -> Option<Arc<Identity>> {
        self.next.clone()
    }

    /// Stage a new identity (replacing a staged one that was never committed).
    pub fn rotate(&mut self) -> Result<Arc<Identity>, String> {
        let id = Identity::generate()?;
        id.save(&self.dir.join(NEXT_FILE))?;
        let id = Arc::new(id);
        self.next = Some(id.clone());
        Ok(id)
    }

    /// Put the staged identity in use: new peer connections present it from now on.
    pub fn commit(&mut self) -> Result<Arc<Identity>, String> {
        let next = self
            .next
            .clone()
            .ok_or("no identity is staged: POST /v1/identity/rotate first")?;
        std::fs::rename(self.dir.join(NEXT_FILE), self.current_path())
            .map_err(|e| format!("{}: {e}", self.dir.display()))?;
        self.current = next.clone();
        self.next = None;
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("perigee-id-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn the_fingerprint_is_the_keys_and_survives_a_new_certificate() {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let spki = Fingerprint::of_spki(&key.public_key_der());
        let a = rcgen::CertificateParams::new(vec!["a".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let b = rcgen::CertificateParams::new(vec!["b".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        assert_ne!(a.der(), b.der());
        assert_eq!(Fingerprint::of_cert(a.der()).unwrap(), spki);
        assert_eq!(Fingerprint::of_cert(b.der()).unwrap(), spki);
        assert!(Fingerprint::parse(spki.as_str()).is_ok());
        assert_eq!(spki.as_str().len(), 7 + 64);
        for bad in ["", "sha256:", "sha1:00", &spki.as_str().to_uppercase()] {
            assert!(Fingerprint::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_store_keeps_its_identity_and_rotates_it_in_two_steps() {
        let dir = tmpdir("store");
        let mut s = IdentityStore::open(&dir).unwrap();
        let first = s.current().fingerprint.clone();
        let meta = std::fs::metadata(s.current_path()).unwrap();
        assert_eq!(
            meta.mode() & 0o777,
            0o600,
            "the key file is the owner's only"
        );
        assert_eq!(
            std::fs::metadata(&dir).unwrap().mode() & 0o777,
            0o700,
            "and so is its directory"
        );
        // Reopened: the same identity, not a new one.
        assert_eq!(
            IdentityStore::open(&dir).unwrap().current().fingerprint,
            first
        );
        assert!(s.commit().is_err(), "nothing staged");
        let next = s.rotate().unwrap().fingerprint.clone();
        assert_ne!(next, first);
        assert_eq!(s.current().fingerprint, first, "staged only");
        // A restart in between keeps the staged one.
        let mut s = IdentityStore::open(&dir).unwrap();
        assert_eq!(s.next().unwrap().fingerprint, next);
        assert_eq!(s.commit().unwrap().fingerprint, next);
        assert!(s.next().is_none());
        assert_eq!(
            IdentityStore::open(&dir).unwrap().current().fingerprint,
            next
        );
        let pem = s.current().certificate_pem();
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----\n") && !pem.contains("PRIVATE"));
        assert!(format!("{:?}", s.current()).contains(next.as_str()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
