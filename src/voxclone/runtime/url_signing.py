"""Links to blobs that expire: HMAC-SHA256 over the key and the expiry time.

A blob store without URLs of its own (the local directory) still lets a job hand
out an audio URL: the API signs ``GET /v1/files/{key}?expires=…&sig=…`` with a
server secret, and the download route checks the signature instead of an API
key. The signature covers the key and the expiry, so neither can be changed.

Every process that may serve the link must know the secret:

* ``VOXCLONE_URL_SIGNING_SECRET`` when set (required in a cluster: replicas on
  other machines must verify links another replica signed);
* otherwise one generated on first use and kept 0600 in
  ``VOXCLONE_HOME/url-signing.key``, shared by every process on the machine.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from pathlib import Path

from voxclone.synth.files import write_atomically

SECRET_FILE = "url-signing.key"
_SECRET_BYTES = 32


class UrlSigner:
    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("the URL signing secret must be at least 16 bytes")
        self._secret = secret

    def signature(self, key: str, expires: int) -> str:
        # surrogatepass: a path that is not valid UTF-8 still gets a (wrong) signature.
        message = f"{key}\n{int(expires)}".encode("utf-8", "surrogatepass")
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def sign(self, key: str, ttl_s: float, *, now: float | None = None) -> tuple[int, str]:
        """(expires as Unix seconds, signature) for a link valid ``ttl_s`` from now."""
        expires = int((time.time() if now is None else now) + ttl_s)
        return expires, self.signature(key, expires)

    def verify(self, key: str, expires: int, sig: str, *, now: float | None = None) -> str | None:
        """None when the link is good, else why not ("expired" or "bad_signature")."""
        # Compare first, so a forged link learns nothing from which check failed.
        # As bytes: compare_digest refuses non-ASCII text, and ``sig`` comes from a URL.
        good = hmac.compare_digest(
            self.signature(key, expires).encode(), sig.encode("utf-8", "surrogatepass")
        )
        if not good:
            return "bad_signature"
        if expires < (time.time() if now is None else now):
            return "expired"
        return None


def load_or_create_secret(home: Path) -> bytes:
    """The machine's secret under ``home``, created 0600 by whichever process is first."""
    path = Path(home) / SECRET_FILE
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # Linked into place (exclusive): a second process never reads a
    # half-written secret, and exactly one secret wins.
    write_atomically(path, secrets.token_hex(_SECRET_BYTES).encode(), exclusive=True)
    return bytes.fromhex(path.read_text().strip())


def build_signer(secret: str | None, home: Path) -> UrlSigner:
    """The signer for a configured secret, else for the machine's own."""
    if secret:
        return UrlSigner(secret.encode())
    return UrlSigner(load_or_create_secret(home))
