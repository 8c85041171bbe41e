"""`python -m serving.selfsigned DIR HOST`: a self-signed certificate for HOST in DIR (tls.crt,
tls.key), unless DIR already holds one (an operator's own, or the one made at an earlier start).

compose.yaml's one-shot `migrate` service runs it into the stack's `tls` volume, which nginx
serves from: the app image has Python and cryptography, the nginx images have no openssl.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CERT_NAME, KEY_NAME = "tls.crt", "tls.key"
VALID_DAYS = 825  # the longest that browsers accept for a server certificate


def subject_names(host: str) -> list[x509.GeneralName]:
    try:
        return [x509.IPAddress(ipaddress.ip_address(host))]
    except ValueError:
        return [x509.DNSName(host)]


def make_certificate(host: str) -> tuple[bytes, bytes]:
    """(certificate PEM, private key PEM) of a self-signed P-256 certificate for `host`."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName(subject_names(host)), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return certificate.public_bytes(serialization.Encoding.PEM), key_pem


def ensure_certificate(directory: Path, host: str) -> bool:
    """Write a certificate for `host` into `directory` unless one is there; True when written."""
    cert_path, key_path = directory / CERT_NAME, directory / KEY_NAME
    if cert_path.is_file() and key_path.is_file():
        return False
    cert_pem, key_pem = make_certificate(host)
    # The key readable by its owner alone; nginx's master process reads it as root.
    descriptor = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as key_file:
        key_file.write(key_pem)
    cert_path.write_bytes(cert_pem)
    return True


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m serving.selfsigned DIR HOST", file=sys.stderr)
        return 2
    directory, host = Path(argv[0]), argv[1]
    if ensure_certificate(directory, host):
        print(f"selfsigned: made a certificate for {host} in {directory}")
    else:
        print(f"selfsigned: {directory} has a certificate already; left as it is")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
