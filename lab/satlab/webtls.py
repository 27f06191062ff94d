"""The lab's TLS: a certificate authority made fresh for each lab and one server certificate for
every origin name (wildcards for the per-load labels). Keys live only in the lab's run dir and die
with it; nothing is committed.

Made with the `openssl` program (argument vectors, no shell): EC P-256 keys, a CA valid 30 days,
a server certificate with the serverAuth usage and every origin name as a subjectAltName.

Browsers trust it through the CA's public key hash: `spki_sha256()` is the base64 SHA-256 of the
CA's SubjectPublicKeyInfo, the form Chromium's `--ignore-certificate-errors-spki-list` takes
(the server sends its certificate with the CA behind it, so the CA's key is in every chain).
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
from dataclasses import dataclass

from .sysrun import run
from .webnames import ORIGINS

VALID_DAYS = "30"


@dataclass(frozen=True)
class TlsFiles:
    directory: str

    @property
    def ca_cert(self) -> str:
        return os.path.join(self.directory, "ca.pem")

    @property
    def ca_key(self) -> str:
        return os.path.join(self.directory, "ca.key")

    @property
    def chain(self) -> str:
        """The server certificate followed by the CA's: what the origins send."""
        return os.path.join(self.directory, "server-chain.pem")

    @property
    def key(self) -> str:
        return os.path.join(self.directory, "server.key")

    @property
    def spki_file(self) -> str:
        return os.path.join(self.directory, "ca.spki")


def server_names() -> list[str]:
    names = []
    for o in ORIGINS:
        names += [o.host, f"*.{o.host}"]
    return names


def _ec_key(path: str) -> None:
    run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path])
    os.chmod(path, 0o600)


def create(directory: str) -> TlsFiles:
    """A new CA and server certificate in `directory` (made 0700); returns their paths."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    files = TlsFiles(directory)
    _ec_key(files.ca_key)
    run(["openssl", "req", "-x509", "-new", "-key", files.ca_key, "-out", files.ca_cert, "-days", VALID_DAYS,
         "-subj", "/O=Perigee satlab/CN=Perigee satlab CA", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
    _ec_key(files.key)
    csr = os.path.join(directory, "server.csr")
    run(["openssl", "req", "-new", "-key", files.key, "-out", csr, "-subj", "/O=Perigee satlab/CN=site.test"])
    ext = os.path.join(directory, "server.ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                "extendedKeyUsage=serverAuth\nsubjectAltName=" + ",".join(f"DNS:{n}" for n in server_names())
                + "\n")
    leaf = os.path.join(directory, "server.pem")
    serial = "0x" + os.urandom(12).hex()
    run(["openssl", "x509", "-req", "-in", csr, "-CA", files.ca_cert, "-CAkey", files.ca_key, "-set_serial",
         serial, "-days", VALID_DAYS, "-sha256", "-extfile", ext, "-out", leaf])
    with open(files.chain, "w") as out, open(leaf) as a, open(files.ca_cert) as b:
        out.write(a.read() + b.read())
    with open(files.spki_file, "w") as f:
        f.write(spki_sha256(files.ca_cert) + "\n")
    return files


def spki_sha256(cert_path: str) -> str:
    """base64(SHA-256(SubjectPublicKeyInfo DER)) of a PEM certificate."""
    pub = run(["openssl", "x509", "-in", cert_path, "-noout", "-pubkey"]).stdout
    der = run_bytes(["openssl", "pkey", "-pubin", "-outform", "DER"], pub.encode())
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


def run_bytes(argv: list[str], data: bytes) -> bytes:
    proc = subprocess.run(argv, input=data, capture_output=True, timeout=30, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout
