"""Deletion receipts and the key that verifies them (issue 49).

``DELETE /v1/voices/{id}`` answers with a signed receipt of what was erased
(service/deletion_receipt.py, made here by :func:`issue_receipt`); its owner
can fetch it once more at ``GET /v1/receipts/{id}`` (runtime/receipt_box.py).
``GET /v1/provenance/public-key`` needs no key: a public key is public, and
whoever holds a receipt (or a file's C2PA manifest) must be able to check it.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from voxclone.api.auth import VoiceReader
from voxclone.api.deps import get_runtime
from voxclone.api.startup_notes import runtime_library_id
from voxclone.errors import NotFound
from voxclone.runtime.receipt_box import ReceiptBox
from voxclone.runtime.signing_key import SigningCredential, load_or_create
from voxclone.service.deletion_receipt import (
    new_receipt_id,
    public_key_pem,
    receipt_payload,
    sign_receipt,
)
from voxclone.service.voices.request import DeletedVoice

router = APIRouter(tags=["provenance"])


class PublicKeyOut(BaseModel):
    certificate_chain_pem: str = Field(
        description="the signer's certificate, then its issuers (PEM): what verifies receipts "
        "and C2PA manifests"
    )
    public_key_pem: str = Field(description="the signer's public key alone (PEM)")
    key_fingerprint: str = Field(
        description="SHA-256 of the signer's certificate (DER), hex: receipts' "
        "server.key_fingerprint"
    )
    generated: bool = Field(description="made by this server (not on any trust list)")
    library: str = Field(description="the id of the voice library this server keeps")


def server_credential(request: Request) -> SigningCredential:
    """The runtime's signing credential (the C2PA manifests' key), made on
    first use like the manifest signer does (runtime/signing_key.py)."""
    state = request.app.state
    found: SigningCredential | None = getattr(state, "receipt_credential", None)
    if found is None:
        settings = get_runtime(request).settings
        found = load_or_create(
            settings.home, cert_path=settings.signing_cert, key_path=settings.signing_key
        )
        state.receipt_credential = found
    return found


def receipt_box(request: Request) -> ReceiptBox:
    box: ReceiptBox | None = getattr(request.app.state, "receipts", None)
    if box is None:
        box = request.app.state.receipts = ReceiptBox()
    return box


def issue_receipt(request: Request, deleted: DeletedVoice) -> dict[str, Any]:
    """Sign the receipt of ``deleted`` and keep it for its owner to fetch once."""
    credential = server_credential(request)
    receipt_id = new_receipt_id()
    payload = receipt_payload(
        deleted,
        receipt_id=receipt_id,
        library_id=runtime_library_id(get_runtime(request)),
        key_fingerprint=credential.fingerprint,
    )
    document = sign_receipt(payload, credential)
    receipt_box(request).put(receipt_id, deleted.record.owner, document)
    return document


@router.get(
    "/v1/receipts/{receipt_id}",
    summary="Fetch a deletion receipt once",
    description="The signed receipt a DELETE /v1/voices/{id} returned, for its owner, once: "
    "a second fetch, another owner's, or one after 24 h answers 404. Kept in the server's "
    "memory only (gone after a restart; not shared between replicas).",
)
async def get_receipt(receipt_id: str, request: Request, principal: VoiceReader) -> Any:
    document = receipt_box(request).take(receipt_id, principal.owner)
    if document is None:
        raise NotFound(f"no receipt {receipt_id} to fetch", field="receipt_id")
    return document


@router.get(
    "/v1/provenance/public-key",
    response_model=PublicKeyOut,
    summary="The server's public signing key (no API key needed)",
)
async def public_key(request: Request) -> PublicKeyOut:
    credential = await run_in_threadpool(server_credential, request)
    return PublicKeyOut(
        certificate_chain_pem=credential.chain_pem.decode(),
        public_key_pem=public_key_pem(credential).decode(),
        key_fingerprint=credential.fingerprint,
        generated=credential.generated,
        library=runtime_library_id(get_runtime(request)),
    )
