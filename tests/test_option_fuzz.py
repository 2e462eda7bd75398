"""The option parsers never end in a traceback (issue 32, "Hangs and wrong exit codes").

Any text given to a timestamp, a count or a parallelism ends with an exit code the CLI
documents (0, 1 findings, 2 usage, 3 bad input) and, on failure, one ``Error:`` line -- never
an unhandled exception (before: ``inspect --now 9999999999999999`` ended in a ``ValueError``
traceback, the year being out of range).
"""

from __future__ import annotations

from cli_support import KEYED
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli.main import statectl

#: Texts an option might be given: numbers of every size and sign, floats, dates, junk.
VALUES = st.one_of(
    st.integers(-(1 << 70), 1 << 70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["0", "-1", "1e23", "9999999999999999", "253402300799999",
                     "253402300800000", "-62135596800001", "now", "", " ", "nan", "inf",
                     "2026-13-01", "9999-12-31T23:59:59", "0001-01-01T00:00:00+05:00",
                     "10000-01-01", "0x10", "1_000"]),
    st.text(max_size=12))

COMMANDS = [
    ("inspect", KEYED, "--now"),
    ("inspect", KEYED, "--top"),
    ("inspect", KEYED, "--limit"),
    ("rescale", KEYED, "--plan", "-p"),
    ("rescale", KEYED, "--plan", "-p", "2", "--max-parallelism"),
    ("diff", KEYED, KEYED, "--limit"),
]


def _run(*args: str) -> None:
    result = CliRunner().invoke(statectl, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        args, repr(result.exception))
    assert result.exit_code in (0, 1, 2, 3), (args, result.exit_code)
    if result.exit_code in (2, 3):
        assert "Error: " in result.stderr and "Traceback" not in result.stderr, result.stderr


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=VALUES, command=st.sampled_from(COMMANDS))
def test_no_option_value_ends_in_a_traceback(value: str, command: tuple[str, ...]) -> None:
    _run(*command, value)


def test_a_time_beyond_the_year_9999_is_a_usage_error() -> None:
    result = CliRunner().invoke(statectl, ["inspect", KEYED, "--now", "9999999999999999"])
    assert result.exit_code == 2 and "outside the years 1 to 9999" in result.stderr


def test_a_max_parallelism_out_of_bounds_names_the_option_not_a_file() -> None:
    from flink_fixtures import fixture_sets

    flink = next(s for s in fixture_sets("heap"))
    snapshot = next(p for p in flink.glob("savepoints/*/canonical/*") if p.is_dir())
    for source in (KEYED, str(snapshot)):
        for bad in ("0", "32769"):
            result = CliRunner().invoke(statectl, ["rescale", source, "--plan", "-p", "1",
                                                   "--max-parallelism", bad])
            assert result.exit_code == 3, result.stderr
            assert result.stderr.startswith(f"Error: --max-parallelism {bad}: Flink's max "
                                            f"parallelism is between 1 and 32768"), result.stderr
            assert ".parquet" not in result.stderr
