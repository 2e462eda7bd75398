"""Create-only and compare-and-swap writes: how processes sharing a state directory agree.

``pyarrow.fs`` can only overwrite. The coordination of :mod:`formats.storage.commit` and
:mod:`formats.statectl.claims` needs two conditional writes:

- :func:`create_only` -- write an object only if nothing is there; exactly one of several
  racing writers succeeds;
- :func:`replace_if` -- replace an object only if it is still the version read
  (:func:`read_versioned`); exactly one of several racing writers succeeds.

How, per store (:func:`guarantee` says which applies):

- local disk: ``open(O_CREAT | O_EXCL)``; a replace takes an exclusive ``lockf`` on a
  ``<path>.lock`` beside the object, compares, writes a temporary file and renames it. Atomic.
- S3 and S3-compatible stores: ``PUT`` with ``If-None-Match: *`` (create-only) or
  ``If-Match: <ETag>`` (replace), which AWS S3 (since August 2024), MinIO, SeaweedFS and R2
  evaluate atomically. pyarrow cannot send these headers, so statectl signs the request itself
  (AWS Signature Version 4, :func:`sigv4_headers`) with the filesystem's credentials. Atomic.
- anything else (GCS, HDFS through pyarrow; S3 with credentials statectl cannot read, such as
  an instance role): write if absent, then read back after a short pause. **Best effort**: two
  writers racing within that pause can both believe they won. Run one writer per state
  directory there.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import hmac
import os
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

import pyarrow.fs as pafs

from formats.storage.filesystems import S3_DEFAULTS, s3_settings, unwrap

__all__ = ["create_only", "guarantee", "read_versioned", "replace_if", "sigv4_headers"]

#: How long a best-effort write waits before reading back what it wrote.
SETTLE_SECONDS = 0.5


def guarantee(fs: pafs.FileSystem) -> str:
    """``"atomic"`` where conditional writes are atomic on ``fs``, else ``"best effort"``."""
    inner = unwrap(fs)
    if isinstance(inner, pafs.LocalFileSystem) or _signer(inner) is not None:
        return "atomic"
    return "best effort"


def create_only(fs: pafs.FileSystem, path: str, data: bytes) -> bool:
    """Write ``data`` at ``path`` unless something is there; True when this call wrote it."""
    inner = unwrap(fs)
    if isinstance(inner, pafs.LocalFileSystem):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        except FileNotFoundError:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            return create_only(fs, path, data)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        return True
    signer = _signer(inner)
    if signer is not None:
        status, _, body = signer.request("PUT", path, data, {"If-None-Match": "*"})
        # 412: it exists; 409: another conditional write to it is in progress (AWS)
        return _conditional_status(status, body, "creating", path)
    return _best_effort(fs, path, data, None)


def read_versioned(fs: pafs.FileSystem, path: str) -> tuple[bytes, str] | None:
    """The object at ``path`` and its version (for :func:`replace_if`), or None if absent."""
    inner = unwrap(fs)
    signer = None if isinstance(inner, pafs.LocalFileSystem) else _signer(inner)
    if signer is not None:
        status, headers, body = signer.request("GET", path)
        if status == 404:
            return None
        if status != 200:
            _conditional_status(status, body, "reading", path)
        return body, headers.get("etag", "")
    try:
        with fs.open_input_stream(path) as stream:
            data = bytes(stream.read())
    except FileNotFoundError:
        return None
    return data, hashlib.sha256(data).hexdigest()


def replace_if(fs: pafs.FileSystem, path: str, data: bytes, version: str) -> str | None:
    """Replace the object at ``path`` with ``data`` if it is still ``version``.

    Returns the new version, or None when the object was another version (or absent).
    """
    inner = unwrap(fs)
    if isinstance(inner, pafs.LocalFileSystem):
        with open(f"{path}.lock", "a+b") as lock:
            fcntl.lockf(lock, fcntl.LOCK_EX)
            current = read_versioned(fs, path)
            if current is None or current[1] != version:
                return None
            temporary = f"{path}.{os.getpid()}.tmp"
            with open(temporary, "wb") as out:
                out.write(data)
            os.replace(temporary, path)
            return hashlib.sha256(data).hexdigest()
    signer = _signer(inner)
    if signer is not None:
        status, headers, body = signer.request("PUT", path, data, {"If-Match": version})
        if not _conditional_status(status, body, "replacing", path):
            return None
        if headers.get("etag"):
            return headers["etag"]
        current = read_versioned(fs, path)
        return current[1] if current is not None and current[0] == data else None
    current = read_versioned(fs, path)
    if current is None or current[1] != version:
        return None
    return hashlib.sha256(data).hexdigest() if _best_effort(fs, path, data, version) else None


def _conditional_status(status: int, body: bytes, action: str, path: str) -> bool:
    """True for 200, False for a failed condition, else an ``OSError``.

    A condition fails with 412, or 409 (AWS: a conditional write to the same key is in
    progress). The ``OSError`` is worded as pyarrow's (``AWS Error <CODE> during <operation>
    operation``), so callers handle it as any other storage error.
    """
    if status == 200:
        return True
    if status in (409, 412):
        return False
    code = _code(body)
    operation = "GetObject" if action == "reading" else "PutObject"
    if status == 403:
        raise PermissionError(f"When {action} s3://{path}: AWS Error ACCESS_DENIED during "
                              f"{operation} operation: {code}")
    named = {"NoSuchBucket": "NO_SUCH_BUCKET", "SlowDown": "SLOW_DOWN"}.get(code, "UNKNOWN")
    raise OSError(f"When {action} s3://{path}: AWS Error {named} (HTTP status {status}) during "
                  f"{operation} operation: {code}")


def _best_effort(fs: pafs.FileSystem, path: str, data: bytes, version: str | None) -> bool:
    if version is None and fs.get_file_info(path).type != pafs.FileType.NotFound:
        return False
    with fs.open_output_stream(path) as out:
        out.write(data)
    time.sleep(SETTLE_SECONDS)
    current = read_versioned(fs, path)
    return current is not None and current[0] == data


def _code(body: bytes) -> str:
    text = body.decode(errors="replace")
    start = text.find("<Code>")
    return text[start + 6:text.find("</Code>")] if start >= 0 else ""


# -- S3: signed requests -------------------------------------------------------------------------


class _S3Signer:
    """Signed single requests to the S3 endpoint of an ``S3FileSystem`` (path ``bucket/key``)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.access_key = str(settings["access_key"])
        self.secret_key = str(settings["secret_key"])
        self.token = settings.get("session_token") or ""
        self.region = settings.get("region") or "us-east-1"
        endpoint = settings.get("endpoint_override") or ""
        scheme = settings.get("scheme") or "https"
        if "://" in endpoint:
            scheme, endpoint = endpoint.split("://", 1)
        self.scheme, self.endpoint = scheme, endpoint.rstrip("/")
        connect = settings.get("connect_timeout") or -1
        request = settings.get("request_timeout") or -1
        self.timeout = max(connect if connect > 0 else S3_DEFAULTS["connect_timeout"],
                           request if request > 0 else S3_DEFAULTS["request_timeout"])

    def request(self, method: str, path: str, body: bytes = b"",
                headers: Mapping[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        """One request, retried on network errors and 5xx as pyarrow's requests are."""
        bucket, _, key = path.strip("/").partition("/")
        if self.endpoint:  # path-style, as pyarrow addresses a custom endpoint
            host, target = self.endpoint, f"/{bucket}/{key}"
        else:  # AWS: virtual-hosted style
            host, target = f"{bucket}.s3.{self.region}.amazonaws.com", f"/{key}"
        extra = dict(headers or {})
        if self.token:
            extra["x-amz-security-token"] = self.token
        import http.client  # with its email parser: only a request to S3 needs it (issue 45)
        attempts = int(S3_DEFAULTS["max_attempts"])
        for attempt in range(attempts):
            signed = sigv4_headers(method, host, target, {}, body, extra, self.access_key,
                                   self.secret_key, self.region)
            connection_class = (http.client.HTTPSConnection if self.scheme == "https"
                                else http.client.HTTPConnection)
            connection = connection_class(host, timeout=self.timeout)
            try:
                connection.request(method, urllib.parse.quote(target, safe="/-_.~"),
                                   body=body, headers=signed)
                answer = connection.getresponse()
                result = (answer.status, {k.lower(): v for k, v in answer.getheaders()},
                          answer.read())
            except OSError as exc:
                if attempt == attempts - 1:
                    timeout = " (curlCode: 28, Timeout was reached)" if isinstance(
                        exc, TimeoutError) else f" ({exc})"
                    raise OSError(f"{method} s3://{path}: AWS Error NETWORK_CONNECTION during "
                                  f"{'GetObject' if method == 'GET' else 'PutObject'} "
                                  f"operation{timeout}") from exc
            else:
                if result[0] < 500 or attempt == attempts - 1:
                    return result
            finally:
                connection.close()
            time.sleep(min(0.05 * 2 ** attempt, 1.0))
        raise AssertionError("unreachable")


def _signer(fs: pafs.FileSystem) -> _S3Signer | None:
    if not isinstance(fs, pafs.S3FileSystem):
        return None
    settings = s3_settings(fs)
    if not settings.get("access_key") or not settings.get("secret_key"):
        return None
    return _S3Signer(settings)


def sigv4_headers(method: str, host: str, path: str, query: Mapping[str, str], body: bytes,
                  headers: Mapping[str, str], access_key: str, secret_key: str, region: str,
                  service: str = "s3", now: dt.datetime | None = None) -> dict[str, str]:
    """The headers of an AWS Signature Version 4 request, ``Authorization`` included.

    ``host`` is the Host header, ``path`` not yet URL-encoded; every given header is signed and
    the payload hash is the body's SHA-256. This is the whole of SigV4 for single S3 requests
    (no chunked upload signing); ``tests/test_s3_server.py`` checks it against AWS's examples.
    """
    now = now or dt.datetime.now(dt.UTC)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    day = amz_date[:8]
    payload_hash = hashlib.sha256(body).hexdigest()
    signed = {k.lower(): " ".join(str(v).split()) for k, v in headers.items()}
    signed.update({"host": host, "x-amz-date": amz_date, "x-amz-content-sha256": payload_hash})
    names = sorted(signed)
    query_text = "&".join(f"{urllib.parse.quote(k, safe='-_.~')}="
                          f"{urllib.parse.quote(v, safe='-_.~')}"
                          for k, v in sorted(query.items()))
    canonical = "\n".join([method, urllib.parse.quote(path, safe="/-_.~"), query_text,
                           "".join(f"{n}:{signed[n]}\n" for n in names), ";".join(names),
                           payload_hash])
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + secret_key).encode()
    for part in (day, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    signed["authorization"] = (f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, "
                               f"SignedHeaders={';'.join(names)}, Signature={signature}")
    return signed
