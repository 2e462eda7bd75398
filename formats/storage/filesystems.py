"""Where checkpoints, inputs and outputs live: one place turns a location into a filesystem.

Every reader and writer goes through ``pyarrow.fs``. :func:`resolve_filesystem` turns a local
path or a URI into a filesystem and a path, per location (a command may read from S3 and write
to the local disk, or the reverse):

- a local path or ``file://``: the local disk;
- ``s3://bucket/path?...``: pyarrow's ``S3FileSystem``. pyarrow's own query parameters
  (``region``, ``scheme``, ``endpoint_override``, ``allow_bucket_creation``, ...) pass through;
  statectl's are parsed and stripped, since pyarrow refuses unknown ones:
  ``connect_timeout`` (seconds, default 1), ``request_timeout`` (seconds without a byte
  moving, default 3) and ``max_attempts`` (tries per request with the AWS SDK's standard
  backoff, default 4). The defaults fail fast on a dead endpoint yet outlast a transient
  error. Credentials: ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` (and
  ``AWS_SESSION_TOKEN``), else the shared credentials file's profile (``AWS_PROFILE``,
  default ``default``), else pyarrow's default chain (instance roles, ...). Found credentials
  are given to the filesystem explicitly, so it carries them into Spark tasks, and statectl
  can sign the conditional requests pyarrow cannot send (:mod:`formats.storage.conditional`);
- any other URI pyarrow supports (``gs://``, ``hdfs://``, ...): ``FileSystem.from_uri``.

Errors of the storage (``OSError`` from pyarrow, with the AWS SDK's error code in its text)
become :class:`~statecore.errors.StorageError` here (:func:`storage_errors`): what was being
done, where, and why in one line, e.g. ``listing s3://b/state failed: the credentials were
refused (AWS SIGNATURE_DOES_NOT_MATCH during ListObjectsV2)``.
"""

from __future__ import annotations

import configparser
import functools
import os
import re
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from statecore.errors import InvalidArgumentError, StatectlError, StorageError

__all__ = ["GCS_RETRY_SECONDS", "S3_DEFAULTS", "absolute_location", "explain", "fsync",
           "is_storage_failure", "join_location", "raise_if_storage_failure", "redact",
           "renames_atomically", "resolve_filesystem", "s3_settings", "storage_errors",
           "unwrap"]

#: statectl's own S3 URI options and their defaults (see the module doc).
S3_DEFAULTS: dict[str, float] = {"connect_timeout": 1.0, "request_timeout": 3.0,
                                 "max_attempts": 4}
#: Google Cloud Storage: how long its client retries (``retry_limit_seconds`` in the URI
#: overrides it). Its default retries for 15 minutes, the last ones waiting on the metadata
#: server for credentials that never come: a command without credentials seemed to hang. With
#: 8 s it fails in about 12-20 s, with one line.
GCS_RETRY_SECONDS = 8


def absolute_location(location: str) -> str:
    """A local path made absolute; a URI as it is.

    What a process in another working directory must be given: a Spark executor runs in a
    directory of its own (a standalone worker's ``work/app-.../N``), where a relative path
    names nothing.
    """
    return location if "://" in location else os.path.abspath(location)


def resolve_filesystem(location: str, filesystem: pafs.FileSystem | None = None
                       ) -> tuple[pafs.FileSystem, str]:
    """The filesystem and path of ``location`` (a local path or a URI), or ``filesystem``'s."""
    if filesystem is not None:
        return filesystem, location
    scheme, sep, _ = location.partition("://")
    if not sep:
        return pafs.LocalFileSystem(), os.path.abspath(location)
    if scheme.lower() == "s3":
        return _s3(location)
    if scheme.lower() in ("gs", "gcs") and "retry_limit_seconds=" not in location:
        joined = "&" if "?" in location else "?"
        location = f"{location}{joined}retry_limit_seconds={GCS_RETRY_SECONDS}"
    with storage_errors("opening", location):
        try:
            fs, path = pafs.FileSystem.from_uri(location)
        except (pa.ArrowInvalid, ValueError) as exc:
            raise InvalidArgumentError(f"{redact(location)} is not a location statectl can "
                                       f"open: {_one_line(exc)}") from exc
    return fs, str(path)


def _s3(location: str) -> tuple[pafs.FileSystem, str]:
    parts = urllib.parse.urlsplit(location)
    ours: dict[str, float] = dict(S3_DEFAULTS)
    theirs = []
    for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        if name not in S3_DEFAULTS:
            theirs.append((name, value))
            continue
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if number <= 0 or (name == "max_attempts" and not number.is_integer()):
            raise InvalidArgumentError(
                f"{name}={value!r} in {redact(location)}: give a positive "
                f"{'whole number' if name == 'max_attempts' else 'number of seconds'}")
        ours[name] = number
    stripped = urllib.parse.urlunsplit(
        (parts.scheme, parts.netloc, parts.path, urllib.parse.urlencode(theirs, safe=":/"), ""))
    with storage_errors("opening", location):
        try:
            fs, path = pafs.FileSystem.from_uri(stripped)
        except (pa.ArrowInvalid, ValueError) as exc:
            raise InvalidArgumentError(f"{redact(location)} is not an S3 location statectl can "
                                       f"open: {_one_line(exc)}") from exc
        settings = s3_settings(fs)
        if settings.get("access_key") is None and not settings.get("anonymous"):
            settings.update(_credentials())
        settings.update(connect_timeout=ours["connect_timeout"],
                        request_timeout=ours["request_timeout"])
        return _s3_filesystem(tuple(sorted((k, _hashable(v)) for k, v in settings.items())),
                              int(ours["max_attempts"])), str(path)


def _hashable(value: Any) -> Any:
    return tuple(sorted(value.items())) if isinstance(value, dict) else value


@functools.lru_cache(maxsize=32)
def _s3_filesystem(settings: tuple[tuple[str, Any], ...], max_attempts: int
                   ) -> pafs.S3FileSystem:
    """One filesystem per distinct settings: its connections are reused by later commands."""
    kwargs = {k: dict(v) if isinstance(v, tuple) else v for k, v in settings}
    kwargs.pop("retry_strategy", None)
    return pafs.S3FileSystem(**kwargs,
                             retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts))


def _credentials() -> dict[str, str]:
    """Credentials from the environment or the shared credentials file (none: pyarrow's chain)."""
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    token = os.environ.get("AWS_SESSION_TOKEN")
    if not (key and secret):
        path = os.environ.get("AWS_SHARED_CREDENTIALS_FILE",
                              os.path.join(os.path.expanduser("~"), ".aws", "credentials"))
        profile = os.environ.get("AWS_PROFILE") or "default"
        parser = configparser.ConfigParser()
        try:
            parser.read(path)
        except configparser.Error:
            return {}
        if not parser.has_section(profile):
            return {}
        key = parser.get(profile, "aws_access_key_id", fallback=None)
        secret = parser.get(profile, "aws_secret_access_key", fallback=None)
        token = parser.get(profile, "aws_session_token", fallback=None)
        if not (key and secret):
            return {}
    found = {"access_key": key, "secret_key": secret}
    if token:
        found["session_token"] = token
    return found


def s3_settings(fs: pafs.FileSystem) -> dict[str, Any]:
    """An ``S3FileSystem``'s settings (endpoint, scheme, region, credentials, timeouts).

    Read from its pickled form, the one place pyarrow exposes them (the retry strategy is not
    among them).
    """
    reduced = fs.__reduce__()
    return dict(reduced[1][0])


def unwrap(fs: pafs.FileSystem) -> pafs.FileSystem:
    """The filesystem under a ``PyFileSystem`` whose handler wraps one (as ``CountingHandler``)."""
    while isinstance(fs, pafs.PyFileSystem) and isinstance(
            getattr(fs.handler, "fs", None), pafs.FileSystem):
        fs = fs.handler.fs
    return fs


def renames_atomically(fs: pafs.FileSystem) -> bool:
    """Whether ``fs`` renames a directory atomically (the local disk, HDFS): object stores not."""
    inner = unwrap(fs)
    if isinstance(inner, pafs.SubTreeFileSystem):
        inner = unwrap(inner.base_fs)
    return inner.type_name in ("local", "hdfs")


def fsync(fs: pafs.FileSystem, path: str) -> None:
    """Flush a file (or directory) to stable storage when it is on the local disk."""
    if isinstance(fs, pafs.LocalFileSystem):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def join_location(location: str, name: str) -> str:
    """``location`` (a path or a URI, its query kept) with ``/name`` appended to its path."""
    if "://" not in location:
        return f"{location.rstrip('/')}/{name}"
    parts = urllib.parse.urlsplit(location)
    return urllib.parse.urlunsplit(parts._replace(path=f"{parts.path.rstrip('/')}/{name}"))


def redact(location: str) -> str:
    """``location`` without credentials (``s3://key:secret@bucket`` shows ``s3://***@bucket``)."""
    return re.sub(r"^([a-zA-Z][\w+.-]*://)[^/@]*@", r"\1***@", location)


# -- errors of the storage ----------------------------------------------------------------------

_AWS = re.compile(r"AWS Error (\w+)(?: \(HTTP status (\d+)\))? during (\w+) operation")
_CREDENTIALS = {"ACCESS_DENIED", "SIGNATURE_DOES_NOT_MATCH", "INVALID_ACCESS_KEY_ID",
                "MISSING_AUTHENTICATION_TOKEN", "EXPIRED_TOKEN", "INVALID_CLIENT_TOKEN_ID",
                "UNRECOGNIZED_CLIENT", "INVALID_SIGNATURE"}
_THROTTLING = {"SLOW_DOWN", "THROTTLING", "REQUEST_LIMIT_EXCEEDED", "SERVICE_UNAVAILABLE"}


def is_storage_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is the store failing (network, credentials, throttling), not bad data."""
    if not isinstance(exc, OSError) or isinstance(exc, FileNotFoundError):
        return False
    text = str(exc)
    return ("AWS Error" in text or "curlCode" in text or "ErrTooManyRequest" in text
            or "google::cloud::Status(" in text
            or re.search(r"Bucket '[^']*' not found", text) is not None)


def explain(exc: BaseException) -> str:
    """One line saying why a storage request failed, with the store's error code."""
    text = _one_line(exc)
    match = _AWS.search(text)
    code, status = (match.group(1), match.group(2)) if match else ("", None)
    where = (f" (AWS {code}{f' (HTTP {status})' if status else ''} during {match.group(3)})"
             if match else "")
    if "curlCode: 28" in text:
        return (f"the endpoint did not answer in time{where}; raise request_timeout=SECONDS "
                f"in the URI if the store is slow")
    if code == "NETWORK_CONNECTION" or "curlCode" in text:
        curl = re.search(r"curlCode: \d+, ([^.;]+)", text)
        reason = f": {curl.group(1)}" if curl else ""
        return f"cannot reach the endpoint{reason}{where}; check endpoint_override"
    if code in _CREDENTIALS:
        return (f"the credentials were refused{where}; check AWS_ACCESS_KEY_ID and "
                f"AWS_SECRET_ACCESS_KEY (or the AWS profile)")
    if code == "NO_SUCH_BUCKET" or re.search(r"Bucket '[^']*' not found", text):
        return f"the bucket does not exist{where}"
    if code in _THROTTLING or status in ("503", "429") or "ErrTooManyRequest" in text \
            or "SlowDown" in text:
        return f"the store is throttling requests{where or ' (HTTP 503)'}; try again later"
    google = _GOOGLE.search(text)
    if google:  # Google Cloud Storage: google::cloud::Status(CODE: message ...)
        what = google.group(2)
        if "OAuth2 access token" in what:
            return (f"no Google Cloud credentials (GCS {google.group(1)}): set "
                    f"GOOGLE_APPLICATION_CREDENTIALS, or run `gcloud auth application-default "
                    f"login`")
        if "resolve" in what.lower() or "connect" in what.lower():
            return (f"cannot reach Google Cloud Storage (GCS {google.group(1)}); add "
                    f"retry_limit_seconds=SECONDS to the URI to wait longer")
        return f"{what[:200]} (GCS {google.group(1)})"
    if match:
        return f"{text[match.end():].lstrip(': ')[:200]}{where}"
    return text[:300]


#: ``google::cloud::Status(UNAVAILABLE: Retry policy exhausted, with a last message of ...``
_GOOGLE = re.compile(r"google::cloud::Status\((\w+): (?:Retry policy exhausted[^,]*, with a "
                     r"last message of )?([^{]*)")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def raise_if_storage_failure(exc: BaseException, action: str, location: str) -> None:
    """Raise the :class:`StorageError` for ``exc`` if it is the store failing (else nothing).

    For handlers that otherwise report bad data: a timeout is not a corrupt file.
    """
    if is_storage_failure(exc):
        raise StorageError(f"{action} {redact(location)} failed: {explain(exc)}") from exc


@contextmanager
def storage_errors(action: str, location: str) -> Iterator[None]:
    """Turn an ``OSError`` of the storage into a :class:`StorageError` saying what failed.

    ``action`` is what was being done (``"listing"``, ``"writing checkpoint"``), ``location``
    where. A missing file is left alone (callers know what it means); statectl's own errors
    pass through.
    """
    try:
        yield
    except StatectlError:
        raise
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise StorageError(f"{action} {redact(location)} failed: {explain(exc)}") from exc
