"""Shared fixtures: where the Flink oracle vectors and fixtures live (see ``oracle.py``), and a
real S3 server (``s3_server.py``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from oracle import oracle_files, resolve_flink_fixtures_dir, resolve_oracle_dir

# A real S3 server (SeaweedFS) for the tests that need one: see s3_server.py.
from s3_server import s3, s3_server, s3_server_factory  # noqa: F401

# pytest-xdist's workers set COLUMNS=80 (and LINES): the commands the tests run would then
# draw for an 80-column terminal, not as for a pipe (cli.output.PIPED_WIDTH), as in one
# process. The tests see the environment a user's pipe has.
for _variable in ("COLUMNS", "LINES"):
    os.environ.pop(_variable, None)

#: Test arguments that are parametrized with every oracle file of one kind, by file name.
ORACLE_FILE_ARGUMENTS = {
    "key_groups_file": "key_groups*.json",
    "ranges_file": "ranges*.json",
    "repartition_file": "repartition*.json",
    "cow_traces_file": "cow_traces*.json",
}


@pytest.fixture(scope="session")
def oracle_dir() -> Path:
    return resolve_oracle_dir()


@pytest.fixture(scope="session")
def flink_fixtures_dir() -> Path:
    return resolve_flink_fixtures_dir()


@pytest.fixture(scope="session")
def big_savepoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """:func:`big_snapshot.write_big_savepoint`'s savepoint (300 MiB), written once per test
    process: the streaming tests of every command read it under a memory limit, none
    changes it (statectl never modifies an input)."""
    from big_snapshot import write_big_savepoint

    return write_big_savepoint(tmp_path_factory.mktemp("big"))


@pytest.fixture(scope="session")
def flink_restorer() -> Iterator[object]:
    """Real Flink restores (``flink_restore.FlinkRestorer``), its drivers shared by the session."""
    from flink_restore import FlinkRestorer, FlinkUnavailable, build

    try:
        build()
    except FlinkUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    with FlinkRestorer() as restorer:
        yield restorer


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for argument, pattern in ORACLE_FILE_ARGUMENTS.items():
        if argument in metafunc.fixturenames:
            files = oracle_files(resolve_oracle_dir(), pattern)
            metafunc.parametrize(argument, files, ids=[f.name for f in files])
