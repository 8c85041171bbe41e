"""The conversation files API (docs/protocol.md, "Files"): upload, list, download, delete.

Same rules as the rest of the API (chat.doors.api.api): session-authenticated, CSRF on unsafe
methods, another user's conversation answers 404 like a missing one.

A download is always an attachment of type application/octet-stream with `nosniff` and a
sandboxing CSP: an uploaded HTML or SVG file must never render, and so never run script,
in the site's origin.

`?thumbnail=1` on an image (docs/protocol.md, "Files") answers a small re-encoded copy, inline, for
the chat page's thumbnails: Pillow wrote every byte of it, so nothing of the upload but its
pixels reaches the browser, and a file that is not an image (or one with more pixels than may be
decoded) is a 400. It is made once and kept (chat.conversations.thumbnails).
"""

from __future__ import annotations

import io
import uuid

from django.conf import settings
from django.http import FileResponse, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.views.decorators.http import require_http_methods

from chat.conversations import images, thumbnails, uploads
from chat.conversations.selectors import conversation_for_user
from chat.doors.api.api import NOT_FOUND
from chat.doors.http.json_api import api_login_required, json_error

# What a multipart body may carry besides the file itself (boundaries, part headers, the
# `path` field): a body longer than the upload limit plus this is refused before parsing.
MULTIPART_OVERHEAD = 64 * 1024


def _conversation(request, conversation_id):
    return conversation_for_user(user=request.user, conversation_id=conversation_id)


@require_http_methods(["GET", "POST"])
@api_login_required
def conversation_files(request, conversation_id: uuid.UUID):
    conversation = _conversation(request, conversation_id)
    if conversation is None:
        return JsonResponse(NOT_FOUND, status=404)
    if request.method == "GET":
        return JsonResponse({"files": uploads.files_list(conversation_id=conversation.pk)})
    return _upload(request, conversation.pk)


def _upload(request, conversation_id) -> JsonResponse:
    limit = settings.AGENT_MAX_UPLOAD_BYTES
    try:
        declared = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        declared = 0
    # Checked before Django parses the body into temporary files.
    if declared > limit + MULTIPART_OVERHEAD:
        return json_error(413, "too_large", f"the file is larger than the {limit}-byte upload limit")
    try:
        upload = request.FILES.get("file")
    except MultiPartParserError:
        return json_error(400, "bad_request", "the multipart body is malformed")
    if upload is None:
        return json_error(400, "bad_request", "send the file as the multipart field 'file'")
    try:
        # Django has already cut the browser's file name to its last part; an explicit `path`
        # (which may name a folder) is taken as it is, so a bad one is refused, not rewritten.
        path = uploads.upload_path(request.POST.get("path") or upload.name)
        stored = uploads.file_store(
            conversation_id=conversation_id, path=path, chunks=upload.chunks(), size=upload.size, source=upload
        )
    except uploads.FileRefused as exc:
        return json_error(exc.status, "too_large" if exc.status == 413 else "bad_request", exc.message)
    return JsonResponse(stored.to_json(), status=201)


@require_http_methods(["GET", "DELETE"])
@api_login_required
def conversation_file(request, conversation_id: uuid.UUID, path: str):
    conversation = _conversation(request, conversation_id)
    if conversation is None:
        return JsonResponse(NOT_FOUND, status=404)
    try:
        path = uploads.upload_path(path)
        if request.method == "DELETE":
            uploads.file_remove(conversation_id=conversation.pk, path=path)
            return HttpResponse(status=204)
        handle, size = uploads.file_open(conversation_id=conversation.pk, path=path)
        if request.GET.get("thumbnail"):
            return _thumbnail(conversation.pk, path, handle)
    except uploads.FileRefused as exc:
        code = {404: "not_found", 413: "too_large"}.get(exc.status, "bad_request")
        return json_error(exc.status, code, exc.message)
    response = FileResponse(
        handle, as_attachment=True, filename=path.rsplit("/", 1)[-1], content_type="application/octet-stream"
    )
    response["Content-Length"] = str(size)
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Cache-Control"] = "private, no-store"
    return response


def _thumbnail(conversation_id, path: str, handle) -> HttpResponse:
    with handle:
        try:
            mime, data = thumbnails.thumbnail(conversation_id, path, handle, box=images.THUMBNAIL_PIXELS, quality=80)
        except images.NotAnImage as exc:
            raise uploads.FileRefused(f"no thumbnail: {exc}") from None
    response = FileResponse(io.BytesIO(data), content_type=mime)
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Cache-Control"] = "private, max-age=60"
    return response
