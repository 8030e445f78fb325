"""The portal's way to a TensorBoard: one path, one target.

The target is the host and port the sync task recorded for that TensorBoard (a node of its own Slurm
job, checked); nothing in the request names it, so this is no open proxy. Only the TensorBoard's
own path prefix is forwarded, with a short list of request headers: the portal's cookies, CSRF
token and Authorization never leave it. Responses stream back as they are (still compressed),
without hop-by-hop headers or cookies.
"""

from collections.abc import Iterator

import urllib3
from django.http import HttpRequest, StreamingHttpResponse

from portal.core.errors import Conflict, Forbidden, Unavailable
from portal.tensorboards.models import TensorBoard, TensorBoardState

FORWARDED_REQUEST_HEADERS = ("Accept", "Accept-Encoding", "Accept-Language", "Cache-Control", "Content-Type",
                             "If-Modified-Since", "If-None-Match", "X-Requested-With")
DROPPED_RESPONSE_HEADERS = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
                            "trailer", "transfer-encoding", "upgrade", "set-cookie"}
METHODS = ("GET", "HEAD", "POST")
CHUNK = 64 * 1024
# One pool per process: gunicorn's threads share it, and its connections to a TensorBoard are reused.
_POOL = urllib3.PoolManager(num_pools=32, maxsize=4, retries=False,
                            timeout=urllib3.Timeout(connect=5.0, read=60.0))


def proxy_url(*, board: TensorBoard, full_path: str) -> str:
    """The only URL a request to this board can become: its recorded host:port, its own prefix."""
    if board.state != TensorBoardState.READY or not board.host or not board.port:
        raise Conflict(f"TensorBoard is {board.get_state_display().lower()}, not ready.",
                       code="tensorboard_not_ready")
    if not full_path.startswith(f"{board.path_prefix}/"):
        raise ValueError(f"{full_path!r} is not under {board.path_prefix}/")
    return f"http://{board.host}:{board.port}{full_path}"


def proxy_forward(*, board: TensorBoard, request: HttpRequest) -> StreamingHttpResponse:
    if request.method not in METHODS:
        raise Forbidden(f"{request.method} is not forwarded to TensorBoard.", code="method_not_allowed")
    origin = request.headers.get("Origin")
    if request.method == "POST" and origin and origin != f"{request.scheme}://{request.get_host()}":
        # The proxy takes POSTs without Django's CSRF token (TensorBoard's page sends none): only
        # from the portal's own pages.
        raise Forbidden("Cross-site requests are not forwarded.", code="cross_site")
    url = proxy_url(board=board, full_path=request.get_full_path())
    headers = {name: request.headers[name] for name in FORWARDED_REQUEST_HEADERS if name in request.headers}
    try:
        upstream = _POOL.request(request.method, url, body=request.body if request.method == "POST" else None,
                                 headers=headers, preload_content=False, decode_content=False, redirect=False)
    except urllib3.exceptions.HTTPError as error:
        raise Unavailable("TensorBoard is not answering; it may have stopped. Reload in a moment.",
                          code="tensorboard_unavailable") from error
    response = StreamingHttpResponse(_stream(upstream), status=upstream.status)
    for name, value in upstream.headers.items():
        if name.lower() not in DROPPED_RESPONSE_HEADERS:
            response[name] = value
    return response


def _stream(upstream: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
    try:
        yield from upstream.stream(CHUNK, decode_content=False)
    except urllib3.exceptions.HTTPError:
        return  # TensorBoard went away mid-answer: the client sees a short response
    finally:
        upstream.release_conn()
