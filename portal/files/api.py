"""/api/v1/files/: a user's home, scratch and the data mount, always as the user (portal.files).

Nothing of a user's is served as a page of the portal: downloads are attachments under a sandbox
policy, previews are JSON, and only raster images are served inline (sandboxed, nosniff)."""

import base64
import binascii
import json
import posixpath
from collections.abc import Iterator

from django.http import HttpResponse, StreamingHttpResponse
from django.urls import reverse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.core.errors import InvalidInput, PreconditionFailed
from portal.files import selectors, services
from portal.files.paths import path_clean, root_clean
from portal.files.serializers import (
    EditSerializer,
    FileUsageSerializer,
    FolderSerializer,
    ItemSerializer,
    ListQuerySerializer,
    LocationSerializer,
    MoveSerializer,
    PreviewSerializer,
    StatSerializer,
)

TUS_VERSION = "1.0.0"
CHUNK = 1024 * 1024
# What a user's bytes get when they leave the portal: no script, no plugin, no sniffing into HTML.
SANDBOX = {"Content-Security-Policy": "sandbox; default-src 'none'; img-src 'self'",
           "X-Content-Type-Options": "nosniff", "Cache-Control": "private, no-store"}
_REFUSED = {400: OpenApiResponse(description="A bad root or path (the error names the field)"),
            403: OpenApiResponse(description="A link, a device, outside your folders, or denied by the "
                                             "file system"),
            404: OpenApiResponse(description="No such file or folder")}
_EXISTS = OpenApiResponse(description="The destination exists")
_NO_UPLOAD = OpenApiResponse(description="No such upload of yours")
_TUS_VERSION = OpenApiResponse(description="Not Tus-Resumable: 1.0.0")
_LOCATION = [OpenApiParameter("root", str, required=True,
                              description="home, scratch, data, or project:<name> (a project's shared "
                                          "folder: its members only)"),
             OpenApiParameter("path", str, description="Relative to the root; empty: the root")]


def _query(request: Request, serializer_class: type = LocationSerializer) -> dict:
    data = serializer_class(data=request.query_params)
    data.is_valid(raise_exception=True)
    return data.validated_data


def _body(request: Request, serializer_class: type) -> dict:
    data = serializer_class(data=request.data)
    data.is_valid(raise_exception=True)
    return data.validated_data


def _attachment(response: HttpResponse, name: str) -> HttpResponse:
    response["Content-Disposition"] = content_disposition_header(True, name or "download")
    for header, value in SANDBOX.items():
        response[header] = value
    return response


class FolderApi(APIView):
    @extend_schema(parameters=[*_LOCATION, OpenApiParameter("sort", str, enum=list(selectors.SORTS)),
                               OpenApiParameter("order", str, enum=["asc", "desc"]),
                               OpenApiParameter("filter", str, description="Names containing this")],
                   responses={200: FolderSerializer, **_REFUSED},
                   summary="A folder's entries (folders first), as you",
                   description="Links, devices and the like are listed by type, never followed or opened.")
    def get(self, request: Request) -> HttpResponse:
        query = _query(request, ListQuerySerializer)
        listing = selectors.folder_json(user=request.user, root=query["root"], path=query["path"],
                                        sort=query["sort"], descending=query["order"] == "desc",
                                        contains=query["filter"])
        # FolderSerializer's shape, as the helper wrote it (sorted, filtered): nothing per entry here,
        # which cost ~40 ms of a 10,000-entry folder's answer.
        place = json.dumps({"root": query["root"], "path": query["path"]}).encode()
        return HttpResponse(place[:-1] + b", " + listing[1:], content_type="application/json")


class StatApi(APIView):
    @extend_schema(parameters=_LOCATION, responses={200: StatSerializer, **_REFUSED},
                   summary="One file or folder: type, size, modified, ETag")
    def get(self, request: Request) -> Response:
        query = _query(request)
        stat = selectors.file_stat(user=request.user, **query)
        return Response(StatSerializer(stat).data, headers={"ETag": f'"{stat.etag}"'})


class PreviewApi(APIView):
    @extend_schema(parameters=_LOCATION, responses={200: PreviewSerializer, **_REFUSED},
                   summary="A file's preview as data: text, a CSV's first rows, a notebook's cells as text",
                   description="Images are only typed here: GET /api/v1/files/content/ serves them.")
    def get(self, request: Request) -> Response:
        query = _query(request, ItemSerializer)
        preview = selectors.file_preview(user=request.user, **query)
        return Response(PreviewSerializer(preview).data, headers={"ETag": f'"{preview.etag}"'})


class ContentApi(APIView):
    @extend_schema(parameters=_LOCATION, responses={(200, "image/*"): OpenApiTypes.BINARY, **_REFUSED},
                   summary="An image inline (PNG, JPEG, GIF, WebP, BMP only), under a sandbox policy")
    def get(self, request: Request) -> HttpResponse:
        query = _query(request, ItemSerializer)
        content_type = selectors.IMAGE_TYPES.get(posixpath.splitext(query["path"])[1].lower())
        if content_type is None:
            raise InvalidInput({"path": ["Only raster images are shown inline; download anything else."]})
        size, etag, output = selectors.file_open(user=request.user, **query)
        response = StreamingHttpResponse(output, content_type=content_type)
        response["Content-Length"] = str(size)
        response["ETag"] = f'"{etag}"'
        for header, value in SANDBOX.items():
            response[header] = value
        return response


class DownloadApi(APIView):
    @extend_schema(parameters=_LOCATION, responses={(200, "application/octet-stream"): OpenApiTypes.BINARY,
                                                    **_REFUSED},
                   summary="Download a file (an attachment, never shown as a page of the portal)")
    def get(self, request: Request) -> HttpResponse:
        query = _query(request, ItemSerializer)
        size, etag, output = selectors.file_open(user=request.user, **query)
        response = StreamingHttpResponse(output, content_type="application/octet-stream")
        response["Content-Length"] = str(size)
        response["ETag"] = f'"{etag}"'
        return _attachment(response, posixpath.basename(query["path"]))


class ZipApi(APIView):
    @extend_schema(parameters=_LOCATION, responses={(200, "application/zip"): OpenApiTypes.BINARY,
                                                    **_REFUSED},
                   summary="Download a folder as a zip, streamed as it is read (no temporary copy)",
                   description="Links and devices inside are left out.")
    def get(self, request: Request) -> HttpResponse:
        query = _query(request)
        output = selectors.folder_zip(user=request.user, **query)
        name = posixpath.basename(query["path"]) or query["root"]
        return _attachment(StreamingHttpResponse(output, content_type="application/zip"), f"{name}.zip")


class UsageApi(APIView):
    @extend_schema(parameters=_LOCATION, responses={200: FileUsageSerializer, **_REFUSED},
                   summary="Space of the file system holding a folder (the root by default): total, free "
                           "for you (your quota where the file system applies one), used (bytes)")
    def get(self, request: Request) -> Response:
        query = _query(request)
        return Response(FileUsageSerializer(selectors.root_usage(user=request.user, **query)).data)


class FolderCreateApi(APIView):
    @extend_schema(request=ItemSerializer, responses={201: None, **_REFUSED,
                                                      409: OpenApiResponse(description="It exists already")},
                   summary="Create a folder")
    def post(self, request: Request) -> Response:
        services.folder_create(user=request.user, **_body(request, ItemSerializer))
        return Response(status=status.HTTP_201_CREATED)


class MoveApi(APIView):
    @extend_schema(request=MoveSerializer, responses={204: None, **_REFUSED, 409: _EXISTS},
                   summary="Rename or move a file or folder (recorded in the audit trail)")
    def post(self, request: Request) -> Response:
        services.file_move(user=request.user, **_body(request, MoveSerializer))
        return Response(status=status.HTTP_204_NO_CONTENT)


class CopyApi(APIView):
    @extend_schema(request=MoveSerializer, responses={204: None, **_REFUSED, 409: _EXISTS},
                   summary="Copy a file or folder (links inside are not copied)")
    def post(self, request: Request) -> Response:
        services.file_copy(user=request.user, **_body(request, MoveSerializer))
        return Response(status=status.HTTP_204_NO_CONTENT)


class DeleteApi(APIView):
    @extend_schema(request=ItemSerializer, responses={204: None, **_REFUSED},
                   summary="Delete a file or folder: it moves into your trash (recorded in the audit trail)")
    def post(self, request: Request) -> Response:
        services.file_delete(user=request.user, **_body(request, ItemSerializer))
        return Response(status=status.HTTP_204_NO_CONTENT)


class TrashEmptyApi(APIView):
    @extend_schema(request=None, responses={204: None}, summary="Empty your trash, for good")
    def post(self, request: Request) -> Response:
        services.trash_empty(user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class EditApi(APIView):
    @extend_schema(request=EditSerializer, parameters=[
        OpenApiParameter("If-Match", str, OpenApiParameter.HEADER,
                         description='The ETag you read (from stat or preview); "*" is not taken'),
        OpenApiParameter("If-None-Match", str, OpenApiParameter.HEADER,
                         description='"*": create a new file')],
        responses={200: StatSerializer, **_REFUSED,
                   412: OpenApiResponse(description="The file changed since that ETag (or exists)")},
        summary="Save a text file, only over the version you read")
    def put(self, request: Request) -> Response:
        data = _body(request, EditSerializer)
        if_match = request.headers.get("If-Match", "").strip().strip('"')
        if request.headers.get("If-None-Match", "").strip() == "*":
            etag = None
        elif len(if_match) == 32 and all(c in "0123456789abcdef" for c in if_match):
            etag = if_match
        else:
            raise InvalidInput({"If-Match": ['Give the ETag you read, or If-None-Match: "*" for a new '
                                             'file.']})
        stat = services.file_write(user=request.user, etag=etag, **data)
        return Response(StatSerializer(stat).data, headers={"ETag": f'"{stat.etag}"'})


# --- tus 1.0 (https://tus.io/protocols/resumable-upload): core and the creation extension ---

def _tus(response: HttpResponse) -> HttpResponse:
    response["Tus-Resumable"] = TUS_VERSION
    response["Cache-Control"] = "no-store"
    return response


def _tus_version(request: Request) -> None:
    if request.headers.get("Tus-Resumable") != TUS_VERSION:
        raise PreconditionFailed(f"Only tus {TUS_VERSION} is spoken here (the Tus-Resumable header).",
                                 code="tus_version")


def _metadata(header: str) -> dict[str, str]:
    values = {}
    for pair in filter(None, (part.strip() for part in header.split(","))):
        key, _, encoded = pair.partition(" ")
        try:
            values[key] = base64.b64decode(encoded, validate=True).decode() if encoded else ""
        except (binascii.Error, UnicodeDecodeError):
            raise InvalidInput({"Upload-Metadata": [f"{key}: not base64 of UTF-8."]}) from None
    return values


def _number(request: Request, header: str) -> int:
    value = request.headers.get(header, "")
    if not value.isdigit() or len(value) > 19:
        raise InvalidInput({header: ["A whole number of bytes is required."]})
    return int(value)


class UploadCreateApi(APIView):
    @extend_schema(request=None, parameters=[
        OpenApiParameter("Tus-Resumable", str, OpenApiParameter.HEADER, required=True, enum=[TUS_VERSION]),
        OpenApiParameter("Upload-Length", int, OpenApiParameter.HEADER, required=True),
        OpenApiParameter("Upload-Metadata", str, OpenApiParameter.HEADER, required=True,
                         description="tus metadata: root, folder (relative to it) and filename, base64")],
        responses={201: OpenApiResponse(description="Created; its address is in Location"), **_REFUSED,
                   409: OpenApiResponse(description="The file exists already"), 412: _TUS_VERSION,
                   413: OpenApiResponse(description="It does not fit in your free space (quota)")},
        summary="Start a resumable upload (tus 1.0 creation)",
        description="Then PATCH its Location with Upload-Offset and application/offset+octet-stream "
                    "chunks; HEAD says how far it got. The file appears when its last byte arrives.")
    def post(self, request: Request) -> HttpResponse:
        _tus_version(request)
        length = _number(request, "Upload-Length")
        metadata = _metadata(request.headers.get("Upload-Metadata", ""))
        root = root_clean(metadata.get("root", "home"))
        folder = path_clean(metadata.get("folder", ""), field="folder")
        filename = metadata.get("filename", "")
        if not filename or "/" in filename:
            raise InvalidInput({"filename": ["One file name, without '/' (Upload-Metadata filename)."]})
        path_clean(filename, field="filename", allow_root=False)
        upload = services.upload_create(user=request.user, root=root, folder=folder, filename=filename,
                                        length=length)
        response = _tus(HttpResponse(status=status.HTTP_201_CREATED))
        response["Location"] = request.build_absolute_uri(reverse("api:file-upload", args=[upload.pk]))
        return response

    @extend_schema(exclude=True)
    def options(self, request: Request, *args: object, **kwargs: object) -> HttpResponse:
        response = HttpResponse(status=status.HTTP_204_NO_CONTENT)
        response["Tus-Resumable"] = TUS_VERSION
        response["Tus-Version"] = TUS_VERSION
        response["Tus-Extension"] = "creation"
        return response


class UploadApi(APIView):
    @extend_schema(request=None, responses={200: None, 404: _NO_UPLOAD, 412: _TUS_VERSION},
                   summary="How far an upload got (Upload-Offset, Upload-Length headers)")
    def head(self, request: Request, upload_id: str) -> HttpResponse:
        upload = selectors.upload_get(user=request.user, upload_id=services.upload_id_clean(upload_id))
        _tus_version(request)
        response = _tus(HttpResponse(status=status.HTTP_200_OK))
        response["Upload-Offset"] = str(selectors.upload_offset(upload=upload))
        response["Upload-Length"] = str(upload.length)
        return response

    @extend_schema(request={"application/offset+octet-stream": OpenApiTypes.BINARY}, parameters=[
        OpenApiParameter("Tus-Resumable", str, OpenApiParameter.HEADER, required=True, enum=[TUS_VERSION]),
        OpenApiParameter("Upload-Offset", int, OpenApiParameter.HEADER, required=True)],
        responses={204: None, 400: OpenApiResponse(description="A bad Upload-Offset or Content-Length"),
                   404: _NO_UPLOAD, 412: _TUS_VERSION,
                   409: OpenApiResponse(description="Upload-Offset is not where the upload is: HEAD it"),
                   415: OpenApiResponse(description="Not application/offset+octet-stream")},
        summary="Append a chunk at Upload-Offset (tus 1.0 core)")
    def patch(self, request: Request, upload_id: str) -> HttpResponse:
        # The upload first: another user's is a 404 whatever the request carries.
        upload = selectors.upload_get(user=request.user, upload_id=services.upload_id_clean(upload_id))
        _tus_version(request)
        if request.content_type.split(";")[0].strip() != "application/offset+octet-stream":
            raise exceptions.UnsupportedMediaType(request.content_type)
        offset = _number(request, "Upload-Offset")
        size = _number(request, "Content-Length")
        stream = request.stream

        def chunks() -> Iterator[bytes]:
            left = size
            while left > 0 and stream is not None and (data := stream.read(min(CHUNK, left))):
                left -= len(data)
                yield data

        new = services.upload_append(upload=upload, offset=offset, size=size, chunks=chunks())
        response = _tus(HttpResponse(status=status.HTTP_204_NO_CONTENT))
        response["Upload-Offset"] = str(new)
        return response
