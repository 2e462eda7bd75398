"""Object storage, the library's parts, against the real S3 server of ``s3_server.py``.

Locations (statectl's URI options parsed, stripped and defaulted; credentials), errors of the
store explained, conditional writes (one winner, on the local disk and on S3), the commit
protocol without rename (written in place, ``_metadata.json`` last, nothing left by a failed
write, one writer per output), and the claims that let processes share a state directory
(ids, the writer lease, pins). The commands on S3 are in ``test_s3_commands.py``, processes
racing and faults in ``test_s3_concurrency.py``.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest
from s3_server import ACCESS_KEY, SECRET_KEY, S3Place, free_ports
from s3_support import raw_keys

from formats.open import open_checkpoint
from formats.statectl import claims as claims_module
from formats.statectl.claims import Claims
from formats.statectl.storage import DirectoryCheckpointStorage
from formats.statectl.writer import write_checkpoint
from formats.storage.commit import MARKER, staged
from formats.storage.conditional import create_only, guarantee, read_versioned, replace_if
from formats.storage.filesystems import explain, resolve_filesystem, s3_settings
from formats.storage.owners import Owner, holding, this_process
from statecore.checkpoint import OperatorSnapshot, SubtaskSnapshot
from statecore.errors import (
    CheckpointCancelledError,
    CheckpointError,
    ConcurrentWriteError,
    InvalidArgumentError,
    StorageError,
)
from statecore.key_groups import assign_to_key_group, compute_key_group_range_for_operator_index
from statecore.keyed_backend import HeapKeyedStateBackend
from statecore.keyed_state import value_state


def operators(entries: int = 300, parallelism: int = 2) -> list[OperatorSnapshot]:
    subtasks = []
    for i in range(parallelism):
        backend = HeapKeyedStateBackend(
            "string", 32, compute_key_group_range_for_operator_index(32, parallelism, i))
        for k in range(entries):
            key = f"k{k}"
            if assign_to_key_group(key, 32, "string") in backend.key_group_range:
                backend.set_current_key(key)
                backend.get_value_state(value_state("v", "int64")).update(k)
        subtasks.append(SubtaskSnapshot(i, keyed=backend.snapshot()))
    return [OperatorSnapshot("op", "op", parallelism, 32, subtasks)]


def dead_pid() -> int:
    """The pid of a process that has exited (and was reaped)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def dead_owner(**changes: Any) -> Owner:
    owner = this_process()
    return Owner(**{**owner.__dict__, "pid": dead_pid(), "pid_start": None, **changes})


# --- locations --------------------------------------------------------------------------------

def test_s3_options_are_parsed_stripped_and_defaulted(s3: S3Place) -> None:
    fs, path = resolve_filesystem(s3.uri("state/chk-1"))
    assert isinstance(fs, pafs.S3FileSystem) and path == s3.path("state/chk-1")
    settings = s3_settings(fs)
    assert (settings["connect_timeout"], settings["request_timeout"]) == (1.0, 3.0)
    assert settings["access_key"] == ACCESS_KEY  # given explicitly: it travels with the fs
    assert settings["endpoint_override"] == s3.server.endpoint
    assert resolve_filesystem(s3.uri("other"))[0] is fs  # one client per distinct settings

    tuned, _ = resolve_filesystem(s3.uri("x", connect_timeout="2", request_timeout="7.5",
                                         max_attempts="2"))
    assert (s3_settings(tuned)["connect_timeout"], s3_settings(tuned)["request_timeout"]) \
        == (2.0, 7.5)
    for bad in ({"request_timeout": "soon"}, {"connect_timeout": "0"},
                {"max_attempts": "1.5"}):
        with pytest.raises(InvalidArgumentError, match=next(iter(bad))):
            resolve_filesystem(s3.uri("x", **bad))
    with pytest.raises(InvalidArgumentError, match="bogus"):
        resolve_filesystem(s3.uri("x", bogus="1"))
    local, where = resolve_filesystem("relative/dir")
    assert isinstance(local, pafs.LocalFileSystem) and where == os.path.abspath("relative/dir")


def test_credentials_come_from_the_shared_credentials_file(
        s3: S3Place, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    credentials = tmp_path / "credentials"
    credentials.write_text(f"[ci]\naws_access_key_id = {ACCESS_KEY}\n"
                           f"aws_secret_access_key = {SECRET_KEY}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_PROFILE", "ci")
    fs, path = resolve_filesystem(s3.uri("state"))
    assert s3_settings(fs)["access_key"] == ACCESS_KEY
    fs.create_dir(path)
    assert guarantee(fs) == "atomic"  # statectl can sign its conditional writes


def test_storage_errors_say_what_where_and_the_code(
        s3: S3Place, monkeypatch: pytest.MonkeyPatch) -> None:
    fs = s3.fs()
    write_checkpoint(s3.path("state/chk-0000001"), 1, operators(), filesystem=fs)
    good = s3.uri("state/chk-0000001")

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    with pytest.raises(StorageError) as refused:
        open_checkpoint(good)
    message = str(refused.value)
    assert message.startswith(f"reading {good} failed: the credentials were refused")
    assert "ACCESS_DENIED" in message and "\n" not in message
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)

    with pytest.raises(StorageError, match="the bucket does not exist"):
        DirectoryCheckpointStorage(s3.server.uri("no-such-bucket-here", "state"))
    port = free_ports(1)[0]
    started = time.monotonic()
    with pytest.raises(StorageError, match="cannot reach the endpoint.*NETWORK_CONNECTION"):
        DirectoryCheckpointStorage(good.replace(s3.server.endpoint, f"127.0.0.1:{port}"),
                                   create=False)
    assert time.monotonic() - started < 15

    s3.server.throttle(("Read", "List"), bucket=s3.bucket)
    try:
        with pytest.raises(StorageError, match="throttling"):
            DirectoryCheckpointStorage(s3.uri("state"), create=False).list()
    finally:
        s3.server.unthrottle(bucket=s3.bucket)


def test_explain_names_the_cause_and_keeps_the_code() -> None:
    def said(text: str) -> str:
        return explain(OSError(text))

    assert said("When reading 'k': AWS Error SLOW_DOWN during GetObject operation: slow") \
        == "the store is throttling requests (AWS SLOW_DOWN during GetObject); try again later"
    timeout = said("AWS Error NETWORK_CONNECTION during HeadObject operation: curlCode: 28, "
                   "Timeout was reached")
    assert timeout.startswith("the endpoint did not answer in time") and "request_timeout" in \
        timeout
    assert said("AWS Error INVALID_ACCESS_KEY_ID during ListObjectsV2 operation: x") \
        .startswith("the credentials were refused")
    assert said("something else\non two lines") == "something else on two lines"


# --- conditional writes -------------------------------------------------------------------------

def test_the_signer_signs_like_the_aws_documentation() -> None:
    """The three S3 examples of AWS's "Signature Version 4" documentation, bit for bit."""
    import datetime as dt

    from formats.storage.conditional import sigv4_headers
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


@pytest.fixture(params=["local", "s3"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[pafs.FileSystem, str]:
    if request.param == "local":
        return pafs.LocalFileSystem(), str(tmp_path)
    s3: S3Place = request.getfixturevalue("s3")
    return resolve_filesystem(s3.uri("claims"))


def test_create_only_has_exactly_one_winner(place: tuple[pafs.FileSystem, str]) -> None:
    fs, root = place
    assert guarantee(fs) == "atomic"
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        won = list(pool.map(lambda i: create_only(fs, f"{root}/claim", f"{i}".encode()),
                            range(4)))
    assert won.count(True) == 1
    found = read_versioned(fs, f"{root}/claim")
    assert found is not None and found[0] == str(won.index(True)).encode()


def test_replace_if_is_a_compare_and_swap(place: tuple[pafs.FileSystem, str]) -> None:
    fs, root = place
    assert create_only(fs, f"{root}/lease", b"v1")
    found = read_versioned(fs, f"{root}/lease")
    assert found is not None
    version = replace_if(fs, f"{root}/lease", b"v2", found[1])
    assert version is not None and version != found[1]
    assert replace_if(fs, f"{root}/lease", b"v3", found[1]) is None  # a stale version loses
    assert read_versioned(fs, f"{root}/lease") == (b"v2", version)
    assert replace_if(fs, f"{root}/absent", b"x", version) is None


def test_without_credentials_to_sign_conditional_writes_are_best_effort(s3: S3Place) -> None:
    assert guarantee(pafs.S3FileSystem(anonymous=True, endpoint_override=s3.server.endpoint,
                                       scheme="http")) == "best effort"
    assert guarantee(s3.fs()) == "atomic"


# --- the commit protocol on an object store -------------------------------------------------------

def test_a_checkpoint_is_written_in_place_with_its_metadata_last(s3: S3Place) -> None:
    seen: list[list[str]] = []

    def between_key_groups() -> bool:
        if not seen:
            seen.append(raw_keys(s3.server, s3.bucket, "state/"))
        return False

    write_checkpoint(s3.uri("state/chk-0000001"), 1, operators(), cancelled=between_key_groups)
    during = seen[0]
    assert "state/chk-0000001/_inprogress" in during  # the claim of the output, first
    assert "state/chk-0000001/_metadata.json" not in during
    assert not any(".inprogress" in key for key in during)  # no staging directory to rename
    after = raw_keys(s3.server, s3.bucket, "state/")
    assert "state/chk-0000001/_metadata.json" in after
    assert "state/chk-0000001/_inprogress" not in after
    checkpoint = open_checkpoint(s3.uri("state/chk-0000001"))
    for info in checkpoint.metadata.files:
        checkpoint.verify_checksum(info.path)  # the checksums taken while writing hold


def test_a_failed_write_leaves_nothing(s3: S3Place) -> None:
    calls = iter(range(1000))
    with pytest.raises(CheckpointCancelledError):
        write_checkpoint(s3.uri("state/chk-0000001"), 1, operators(),
                         cancelled=lambda: next(calls) == 5)
    assert [k for k in raw_keys(s3.server, s3.bucket, "state/") if not k.endswith("/")] == []
    with pytest.raises(CheckpointError, match="it does not exist"):
        open_checkpoint(s3.uri("state/chk-0000001"))


def test_one_writer_per_output(s3: S3Place) -> None:
    fs, final = resolve_filesystem(s3.uri("out"))
    with staged(fs, final, "out", "writing") as first:
        with pytest.raises(ConcurrentWriteError, match=r"out is being written by another "
                           r"process \(pid \d+ on"):
            with staged(fs, final, "out", "writing"):
                pass
        with fs.open_output_stream(f"{first}/data") as out:
            out.write(b"x")
        from formats.storage.commit import commit
        commit(fs, first, final, "_done", b"")
    with pytest.raises(CheckpointError, match="already exists"):
        with staged(fs, final, "out", "writing"):
            pass
    assert raw_keys(s3.server, s3.bucket, "out/")[-2:] == ["out/_done", "out/data"]
    # deleted, the output may be written again (though the server may still list its
    # directory: SeaweedFS keeps emptied directories)
    fs.delete_dir(final)
    with staged(fs, final, "out", "writing") as again:
        commit(fs, again, final, "_done", b"")


def test_incomplete_directories_are_invisible_and_pruned_once_their_writer_is_gone(
        s3: S3Place) -> None:
    storage = DirectoryCheckpointStorage(s3.uri("state"))
    write_checkpoint(s3.path("state/chk-0000001"), 1, operators(), filesystem=storage.fs)
    fs = storage.fs
    # a writer that died mid-write, and one that runs (this process, its record held)
    for name, owner in (("chk-0000002", dead_owner()), ("chk-0000003", this_process())):
        with fs.open_output_stream(s3.path(f"state/{name}/{MARKER}")) as out:
            out.write(owner.to_bytes())
        with fs.open_output_stream(s3.path(f"state/{name}/op-0/keyed/0/0.parquet")) as out:
            out.write(b"partial")
    live = this_process()
    with fs.open_output_stream(s3.path(f"state/chk-0000003/{MARKER}")) as out:
        out.write(live.to_bytes())
    with holding(live):
        assert [c.checkpoint_id for c in storage.completed()] == [1]
        assert [s.checkpoint_id for s in storage.list()] == [1]
        with pytest.raises(CheckpointError, match="no _metadata.json"):
            open_checkpoint(s3.uri("state/chk-0000002"))
        found = {leftover.location.split("?")[0].rsplit("/", 1)[1]: leftover
                 for leftover in storage.leftovers()}
        assert {k: (v.what, v.alive) for k, v in found.items()} == {
            "chk-0000002": ("incomplete", False), "chk-0000003": ("incomplete", True)}
        result = storage.prune(keep=1)
        assert [r.location.split("?")[0].rsplit("/", 1)[1] for r in result.removed] == \
            ["chk-0000002"]
        assert not [k for k in raw_keys(s3.server, s3.bucket, "state/chk-0000002/")
                    if not k.endswith("/")]
        assert raw_keys(s3.server, s3.bucket, "state/chk-0000003/")
    # its writer finished without publishing (or died): now it goes too
    assert [r.what for r in storage.prune(keep=1).removed] == ["incomplete"]


# --- claims -------------------------------------------------------------------------------------

@pytest.fixture(params=["local", "s3"])
def state_dir(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "local":
        return str(tmp_path / "state")
    s3: S3Place = request.getfixturevalue("s3")
    return s3.uri("state")


def test_checkpoint_ids_are_claimed_once(state_dir: str) -> None:
    def claim_three(_: int) -> list[int]:
        storage = DirectoryCheckpointStorage(state_dir)
        return [storage.claim(1) for _ in range(3)]

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        claimed = [i for ids in pool.map(claim_three, range(3)) for i in ids]
    assert sorted(claimed) == list(range(1, 10))


def test_one_writer_lease_per_state_directory(state_dir: str) -> None:
    first = DirectoryCheckpointStorage(state_dir)
    second = DirectoryCheckpointStorage(state_dir)
    with first.writing():
        with pytest.raises(ConcurrentWriteError, match=r"another build is writing to .*\(pid "
                           rf"{os.getpid()} on {socket.gethostname()}"):
            with second.writing():
                pass
    with second.writing():
        pass


def _forge_lease(fs: pafs.FileSystem, path: str, owner: Owner, expires_ms: int) -> None:
    with fs.open_output_stream(path) as out:
        out.write(json.dumps({**owner.__dict__, "expires_ms": expires_ms}).encode())


def test_an_object_store_lease_is_taken_over_only_from_a_holder_that_is_gone(
        s3: S3Place) -> None:
    storage = DirectoryCheckpointStorage(s3.uri("state"))
    path = storage.claims.path("writer")
    far = int((time.time() + 600) * 1000)
    _forge_lease(storage.fs, path, dead_owner(), far)  # this host, process gone: at once
    with storage.writing():
        pass
    remote = this_process()
    _forge_lease(storage.fs, path, Owner(remote.token, "elsewhere", 1, None, 0), far)
    with pytest.raises(ConcurrentWriteError, match="pid 1 on elsewhere"):
        with storage.writing():
            pass
    _forge_lease(storage.fs, path, Owner(remote.token, "elsewhere", 1, None, 0),
                 int(time.time() * 1000) - 1)  # expired
    with storage.writing():
        pass


def test_a_lost_lease_stops_the_writer(s3: S3Place, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(claims_module, "LEASE_SECONDS", 0.6)
    storage = DirectoryCheckpointStorage(s3.uri("state"))
    with storage.writing() as lease:
        assert storage.claim(1) == 1
        _forge_lease(storage.fs, storage.claims.path("writer"),
                     Owner("thief", "elsewhere", 1, None, 0), int(time.time() * 1000) + 60_000)
        deadline = time.monotonic() + 10
        while not lease.lost and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(ConcurrentWriteError, match="lost the state directory"):
            storage.claim(2)
    found = read_versioned(storage.fs, storage.claims.path("writer"))
    assert found is not None and b"thief" in found[0]  # the new holder's lease is left alone


def test_a_pinned_checkpoint_is_not_released(state_dir: str) -> None:
    storage = DirectoryCheckpointStorage(state_dir)
    for checkpoint_id in (1, 2):
        write_checkpoint(f"{storage.root}/chk-{checkpoint_id:07d}", checkpoint_id, operators(),
                         filesystem=storage.fs)
    with storage.reading(1) as checkpoint:
        with pytest.raises(ConcurrentWriteError, match="checkpoint 1 .* is being read"):
            DirectoryCheckpointStorage(state_dir).release(1)
        assert DirectoryCheckpointStorage(state_dir).prune(keep=1).kept == (1,)
        storage.discard(1)  # retention keeps it for now
        for info in checkpoint.metadata.files:
            checkpoint.verify_checksum(info.path)
    with Claims(storage.fs, storage.root).releasing(1):
        with pytest.raises(ConcurrentWriteError, match="being released"):
            with storage.reading(1):
                pass
    assert DirectoryCheckpointStorage(state_dir).prune(keep=1).released == (1,)


def test_claims_of_processes_that_are_gone_are_ignored_and_pruned(state_dir: str) -> None:
    storage = DirectoryCheckpointStorage(state_dir)
    for checkpoint_id in (1, 2):
        write_checkpoint(f"{storage.root}/chk-{checkpoint_id:07d}", checkpoint_id, operators(),
                         filesystem=storage.fs)
    gone = dead_owner()
    assert create_only(storage.fs, storage.claims.path(f"read-0000001-{gone.token}"),
                       gone.to_bytes())
    assert create_only(storage.fs, storage.claims.path("release-0000002"), gone.to_bytes())
    with storage.reading(2):
        pass  # a dead releaser's intent does not block a reader
    result = storage.prune(keep=1)
    assert result.released == (1,)  # a dead reader's pin does not block a release
    assert [leftover.what for leftover in result.removed] == ["claim", "claim"]  # pin, intent
    assert not [name for name in storage.claims._names() if name.startswith(("read", "rel"))]


def test_a_checkpoint_a_command_reads_is_not_released_meanwhile(state_dir: str) -> None:
    from formats.open import pinned
    storage = DirectoryCheckpointStorage(state_dir)
    for checkpoint_id in (1, 2):
        assert storage.claim(checkpoint_id) == checkpoint_id  # as `build` does
        write_checkpoint(f"{storage.root}/chk-{checkpoint_id:07d}", checkpoint_id, operators(),
                         filesystem=storage.fs)
    first = storage.location(1, storage.completed()[0].kind)
    with pinned(first), pinned(f"{first}/_metadata.json" if "://" not in first else first):
        with pytest.raises(ConcurrentWriteError, match="is being read"):
            storage.release(1)
    assert storage.release(1).checkpoint_id == 1
    with pinned(first):  # gone: nothing to hold; reading it then says so
        with pytest.raises(CheckpointError, match="does not exist|no _metadata.json"):
            open_checkpoint(first)


def test_a_reader_without_write_access_reads_unpinned(
        state_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from formats.open import pinned
    from formats.storage import conditional
    storage = DirectoryCheckpointStorage(state_dir)
    storage.claim(1)
    write_checkpoint(f"{storage.root}/chk-0000001", 1, operators(), filesystem=storage.fs)

    def refused(fs: Any, path: str, data: bytes) -> bool:
        raise PermissionError("AWS Error ACCESS_DENIED during PutObject operation: x")

    monkeypatch.setattr(conditional, "create_only", refused)
    monkeypatch.setattr(claims_module, "create_only", refused)
    with pinned(storage.location(1, storage.completed()[0].kind)):
        pass
    with pytest.raises(StorageError, match="the credentials were refused"):
        storage.claim(2)  # a writer needs the access
