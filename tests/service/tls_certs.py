"""Throwaway PEM certificates for the secured-quorum tests, made with the ``openssl`` CLI (EC P-256)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

_EC = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")


def _openssl(folder: Path, *args: str) -> None:
    done = subprocess.run(["openssl", *args], cwd=folder, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed: {done.stderr.strip()[-2000:]}")


def make_ca(folder: Path, name: str) -> Path:
    """A self-signed CA ``<name>.pem`` (key ``<name>.key``) in `folder`."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command line tool is needed to make certificates")
    folder.mkdir(parents=True, exist_ok=True)
    _openssl(
        folder,
        "req",
        "-x509",
        *_EC,
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.pem",
        "-days",
        "2",
        "-subj",
        f"/CN={name}",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    )
    return folder / f"{name}.pem"


def make_cert(folder: Path, ca: str, name: str, subject: str) -> Path:
    """A certificate signed by CA `ca` for `subject` (``/O=kraftlake/CN=...``), valid for 127.0.0.1 as a server
    and as a client; returns ``<name>.keystore.pem`` (unencrypted key, then the certificate)."""
    (folder / f"{name}.ext").write_text(
        "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n"
        "extendedKeyUsage=serverAuth,clientAuth\n"
    )
    _openssl(folder, "req", "-new", *_EC, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject)
    _openssl(
        folder,
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        f"{ca}.pem",
        "-CAkey",
        f"{ca}.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-sha256",
        "-extfile",
        f"{name}.ext",
        "-out",
        f"{name}.pem",
    )
    keystore = folder / f"{name}.keystore.pem"
    keystore.write_text((folder / f"{name}.key").read_text() + (folder / f"{name}.pem").read_text())
    return keystore
