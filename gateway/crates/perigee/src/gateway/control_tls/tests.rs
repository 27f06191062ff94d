//! The listener's revocation list and its connection bound, against certificates that `openssl ca`
//! issues and revokes in a temporary directory (a CA the way the API's fleet CA is one).
use super::*;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection};
use std::path::PathBuf;
use std::process::Command;
use std::sync::mpsc;

const CA_CNF: &str = "\
[ca]
default_ca = fleet
[fleet]
database = index.txt
new_certs_dir = .
certificate = ca.pem
private_key = ca.key
serial = serial
crlnumber = crlnumber
default_md = sha256
default_days = 2
default_crl_days = 30
policy = any
unique_subject = no
[any]
commonName = supplied
[client]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = clientAuth
[server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1
[crl]
authorityKeyIdentifier = keyid:always
";

/// A CA in a temporary directory: issues, revokes, and writes its revocation list.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn new(tag: &str) -> Pki {
        let dir = std::env::temp_dir().join(format!("perigee-ctls-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ca.cnf"), CA_CNF).unwrap();
        std::fs::write(dir.join("index.txt"), "").unwrap();
        std::fs::write(dir.join("serial"), "1000\n").unwrap();
        std::fs::write(dir.join("crlnumber"), "01\n").unwrap();
        let pki = Pki { dir };
        pki.openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=fleet test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        pki
    }

    fn openssl(&self, args: &[&str]) {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(&self.dir)
            .output()
            .expect("openssl runs");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// `name.pem` and `name.key`, with the extensions of section `kind` (client or server).
    fn issue(&self, name: &str, kind: &str) {
        let (key, csr, pem) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
        );
        self.openssl(&[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &csr,
            "-subj",
            &format!("/CN={name}"),
        ]);
        self.openssl(&[
            "ca",
            "-batch",
            "-config",
            "ca.cnf",
            "-extensions",
            kind,
            "-notext",
            "-in",
            &csr,
            "-out",
            &pem,
        ]);
    }

    fn revoke(&self, name: &str) {
        self.openssl(&[
            "ca",
            "-batch",
            "-config",
            "ca.cnf",
            "-revoke",
            &format!("{name}.pem"),
        ]);
    }

    /// The CA's revocation list now (PEM).
    fn crl(&self) -> Vec<u8> {
        self.openssl(&[
            "ca", "-batch", "-config", "ca.cnf", "-gencrl", "-crlexts", "crl", "-out", "crl.pem",
        ]);
        std::fs::read(self.dir.join("crl.pem")).unwrap()
    }

    fn files(&self, crl: Option<&str>) -> TlsFiles {
        TlsFiles {
            cert: self.path("server.pem"),
            key: self.path("server.key"),
            client_ca: self.path("ca.pem"),
            crl: crl.map(|c| self.path(c)),
        }
    }

    /// Connects as `name` (its certificate and key), sends a line, and reads the answer to its end.
    fn ask(&self, port: u16, name: &str) -> Result<String, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        for ca in read_certs(&self.path("ca.pem")).unwrap() {
            roots.add(ca).unwrap();
        }
        let chain = read_certs(&self.path(&format!("{name}.pem"))).unwrap();
        let key = PrivateKeyDer::from_pem_file(self.path(&format!("{name}.key"))).unwrap();
        let config = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .unwrap();
        let server = ServerName::try_from("127.0.0.1").unwrap();
        let conn = ClientConnection::new(Arc::new(config), server).unwrap();
        let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut tls = StreamOwned::new(conn, tcp);
        tls.write_all(b"hello\n").map_err(|e| e.to_string())?;
        let mut answer = String::new();
        tls.read_to_string(&mut answer).map_err(|e| e.to_string())?;
        Ok(answer)
    }

    fn remove(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Serves `tls` on a loopback port: each connection reads a line and answers "ok".
fn listen(tls: Arc<ControlTls>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        serve_bounded(listener, 8, move |tcp| {
            let _ = tls.answer(tcp, |stream| {
                let mut byte = [0u8; 1];
                while stream.read(&mut byte)? == 1 && byte[0] != b'\n' {}
                stream.write_all(b"ok")
            });
        })
    });
    port
}

#[test]
fn a_client_certificate_on_the_pushed_revocation_list_is_refused() {
    let pki = Pki::new("crl");
    pki.issue("server", "server");
    pki.issue("api", "client");
    pki.issue("retired", "client");
    let tls = Arc::new(ControlTls::load(&pki.files(Some("kept.crl"))).unwrap());
    let port = listen(tls.clone());
    assert_eq!(pki.ask(port, "api"), Ok("ok".into()));
    assert_eq!(pki.ask(port, "retired"), Ok("ok".into()), "not revoked yet");

    pki.revoke("retired");
    assert_eq!(tls.install_crl(&pki.crl()), Ok(true));
    let refused = pki.ask(port, "retired").unwrap_err();
    assert!(refused.contains("Revoked"), "{refused}");
    assert_eq!(
        pki.ask(port, "api"),
        Ok("ok".into()),
        "the others still get in"
    );

    // Kept on disk: a restarted listener refuses it from the start.
    let restarted = Arc::new(ControlTls::load(&pki.files(Some("kept.crl"))).unwrap());
    let port = listen(restarted);
    assert!(pki.ask(port, "retired").is_err());
    assert_eq!(pki.ask(port, "api"), Ok("ok".into()));
    pki.remove();
}

#[test]
fn a_gateway_server_certificate_is_no_client_certificate() {
    // A gateway removed from the fleet keeps its server pair: it is refused as a client anyway.
    let pki = Pki::new("eku");
    pki.issue("server", "server");
    pki.issue("gw2", "server");
    let port = listen(Arc::new(ControlTls::load(&pki.files(None)).unwrap()));
    assert!(pki.ask(port, "gw2").is_err());
    pki.remove();
}

#[test]
fn a_malformed_revocation_list_changes_nothing_and_a_bad_kept_one_stops_the_start() {
    let pki = Pki::new("bad");
    pki.issue("server", "server");
    pki.issue("api", "client");
    let tls = Arc::new(ControlTls::load(&pki.files(Some("kept.crl"))).unwrap());
    let port = listen(tls.clone());
    let e = tls
        .install_crl(b"-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n")
        .unwrap_err();
    assert!(!e.is_empty());
    assert!(tls.install_crl(b"not pem at all").is_err());
    assert!(!pki.dir.join("kept.crl").exists());
    assert_eq!(pki.ask(port, "api"), Ok("ok".into()));
    std::fs::write(pki.dir.join("kept.crl"), "garbage").unwrap();
    let e = ControlTls::load(&pki.files(Some("kept.crl")))
        .err()
        .unwrap();
    assert!(e.contains("kept.crl"), "{e}");
    pki.remove();
}

#[test]
fn past_the_bound_a_connection_is_closed_at_once_and_a_freed_slot_is_taken_again() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (ended_tx, ended) = mpsc::channel::<()>();
    let ended_tx = Mutex::new(ended_tx);
    // Each answered connection is held until its client closes it.
    std::thread::spawn(move || {
        serve_bounded(listener, 3, move |mut tcp| {
            let mut byte = [0u8; 1];
            while tcp.read(&mut byte).is_ok_and(|n| n > 0) {}
            let _ = ended_tx.lock().unwrap().send(());
        })
    });
    let connect = || {
        let c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c
    };
    // Closed: the end of the stream or a reset, well before the 30 s read timeout.
    let is_closed = |c: &mut TcpStream| {
        let mut b = [0u8; 1];
        match c.read(&mut b) {
            Ok(n) => n == 0,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    };
    let held_open = |c: &mut TcpStream| {
        c.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut b = [0u8; 1];
        let e = c.read(&mut b).unwrap_err();
        matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        )
    };
    let mut held: Vec<TcpStream> = (0..3).map(|_| connect()).collect();
    // Twenty more while three are held: each is closed by the listener, none gets a thread.
    for _ in 0..20 {
        assert!(
            is_closed(&mut connect()),
            "a connection past the bound was kept"
        );
    }
    for c in held.iter_mut() {
        assert!(held_open(c), "a connection within the bound was closed");
    }
    // One ends: its slot is free again.
    drop(held.pop());
    ended.recv_timeout(Duration::from_secs(30)).unwrap();
    let mut again = connect();
    assert!(held_open(&mut again));
    assert!(is_closed(&mut connect()));
}

#[test]
fn a_trickling_peer_is_cut_off_at_the_deadline() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let writer = std::thread::spawn(move || {
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        // A byte every 50 ms for up to 30 s: each read's own timeout would never fire.
        for _ in 0..600 {
            if c.write_all(b"x").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let (tcp, _) = listener.accept().unwrap();
    let mut stream = Deadline::new(tcp, Duration::from_millis(400));
    let mut got = 0;
    let mut b = [0u8; 1];
    let err = loop {
        match stream.read(&mut b) {
            Ok(n) => got += n,
            Err(e) => break e,
        }
    };
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
    assert!(
        got < 600,
        "read {got} bytes: the deadline did not end the reads"
    );
    drop(stream);
    writer.join().unwrap();
}

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
        crl: None,
    };
    let e = ControlTls::load(&files(&missing)).err().unwrap();
    assert!(e.contains("missing.pem"), "{e}");
    let e = ControlTls::load(&files(&empty.display().to_string()))
        .err()
        .unwrap();
    assert!(e.contains("no certificate"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
