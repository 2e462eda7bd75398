"""Integer sums wrap around as Flink's do (issue 41, item 4): never a failed checkpoint.

Flink's ``LongSumAggregator`` and ``SumFunction.LongSum`` add Java ``long`` values, which wrap
at 64 bits; ``IntSum``/``ShortSum``/``ByteSum`` cast the sum back to their type. A build's
``sum`` of an integer column does the same, folded or record by record, with checkpoints on
the way: the state is the true sum modulo ``2**bits`` as a signed value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_support import run

from formats.open import open_checkpoint
from formats.ops.build import build_state

LONG_MAX = (1 << 63) - 1


def java(total: int, bits: int = 64) -> int:
    """``total`` as Java's arithmetic of ``bits`` bits has it."""
    half = 1 << (bits - 1)
    return (total + half) % (1 << bits) - half


def sums(location: str, name: str) -> dict[Any, Any]:
    checkpoint = open_checkpoint(location)
    op = checkpoint.metadata.operators[0]
    return {key: value for _, key, _, value in checkpoint.keyed_entries(op.uid, name)}


def test_java_reference() -> None:
    assert java(LONG_MAX + 1) == -(1 << 63) and java(-(1 << 63) - 1) == LONG_MAX
    assert java(3 * LONG_MAX) == LONG_MAX - 2 and java(5) == 5
    assert java((1 << 31), 32) == -(1 << 31)


@pytest.mark.parametrize("fold", [True, False])
@pytest.mark.parametrize("every", [None, 2])
def test_an_int64_sum_past_a_long_wraps_as_flink_does(tmp_path: Path, fold: bool,
                                                      every: int | None) -> None:
    values = [LONG_MAX, 1, LONG_MAX, LONG_MAX, 5, -(1 << 63), 7]
    data = tmp_path / "events.csv"
    data.write_text("user,amount\n" + "".join(f"{'ab'[i % 2]},{v}\n"
                                              for i, v in enumerate(values)))
    summary = build_state([str(data)], key="user", aggregations=["sum:amount", "min:amount"],
                          checkpoint_dir=str(tmp_path / "state"), fold=fold,
                          checkpoint_every=every)
    assert summary.failed_checkpoints == {}
    assert sums(summary.final_location, "sum_amount") == {
        "a": java(sum(values[0::2])), "b": java(sum(values[1::2]))}
    assert sums(summary.final_location, "min_amount") == {"a": min(values[0::2]),
                                                          "b": min(values[1::2])}


def test_the_overflowing_build_of_the_issue_succeeds(tmp_path: Path) -> None:
    data = tmp_path / "events.csv"
    data.write_text("user,amount\n" + f"a,{LONG_MAX}\n" * 3 + "b,1\n")
    code, out, err = run("build", str(data), "--key", "user", "--agg", "sum:amount",
                         "--checkpoint-dir", str(tmp_path / "state"), "--parallelism", "3")
    assert code == 0, err
    assert sums(str(tmp_path / "state" / "chk-0000001"), "sum_amount") == {
        "a": java(3 * LONG_MAX), "b": 1}


@pytest.mark.parametrize(("arrow", "bits"), [(pa.int32(), 32), (pa.int16(), 16),
                                             (pa.int8(), 8)])
def test_narrow_integer_sums_wrap_at_their_width(tmp_path: Path, arrow: pa.DataType,
                                                 bits: int) -> None:
    top = (1 << (bits - 1)) - 1
    values = [top, top, 3, -top]
    data = tmp_path / "events.parquet"
    pq.write_table(pa.table({"user": ["a", "a", "a", "b"], "amount": pa.array(values, arrow)}),
                   data)
    summary = build_state([str(data)], key="user", aggregations=["sum:amount"],
                          checkpoint_dir=str(tmp_path / "state"))
    assert sums(summary.final_location, "sum_amount") == {
        "a": java(2 * top + 3, bits), "b": -top}


def test_only_integer_sums_wrap() -> None:
    from formats.ops.build import parse_aggregations
    columns = {"i": "int64", "f": "float64", "s": "int32"}
    parsed = {a.spec: a for a in parse_aggregations(["sum:i", "sum:f", "max:i", "sum:s"],
                                                    columns)}
    add = parsed["sum:i"].descriptor.reduce_function
    assert add is not None and add(LONG_MAX, 1) == -(1 << 63)
    narrow = parsed["sum:s"].descriptor.reduce_function
    assert narrow is not None and narrow((1 << 31) - 1, 1) == -(1 << 31)
    floats = parsed["sum:f"].descriptor.reduce_function
    assert floats is not None and floats(1e308, 1e308) == float("inf")
    high = parsed["max:i"].descriptor.reduce_function
    assert high is not None and high(LONG_MAX, 1) == LONG_MAX
