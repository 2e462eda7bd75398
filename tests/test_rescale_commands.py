"""`statectl rescale`, `verify` and `diff` through the CLI: both output modes, every exit code."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import KEYED, OPERATOR, run, run_json, unchanged

from statecore.key_groups import compute_key_group_range_for_operator_index


@pytest.fixture(autouse=True)
def _samples_unchanged() -> Iterator[None]:
    yield from unchanged(KEYED, OPERATOR)


def test_plan_in_json(tmp_path: Path) -> None:
    document = run_json("rescale", KEYED, "-p", "3", "--plan")
    assert set(document) == {"schema_version", "plan"}
    (op,) = document["plan"]["operators"]
    assert (op["old_parallelism"], op["new_parallelism"]) == (2, 3)
    ranges = [compute_key_group_range_for_operator_index(128, 3, i) for i in range(3)]
    assert [st["key_group_range"] for st in op["subtasks"]] == [
        [r.start, r.end] for r in ranges]
    source = run_json("inspect", KEYED)["operators"][0]
    assert sum(st["entries"] for st in op["subtasks"]) == sum(
        s["entries"] for s in source["states"])
    assert op["skew"] >= 1 and document["plan"]["skew"] == op["skew"]
    assert not (tmp_path / "out").exists()


def test_plan_union_blowup_in_json() -> None:
    (op,) = run_json("rescale", OPERATOR, "-p", "5", "--plan")["plan"]["operators"]
    assert op["union_elements"] == 3 and op["union_blowup"] == 3 * 5
    assert all(st["key_group_range"] is None for st in op["subtasks"])


@pytest.mark.parametrize("extra", [[], ["--compact"], ["--max-parallelism", "256"]],
                         ids=["metadata", "compact", "max-parallelism"])
@pytest.mark.parametrize("sample", [KEYED, OPERATOR], ids=["keyed", "operator"])
def test_rescale_then_verify_and_diff_in_json(tmp_path: Path, extra: list[str],
                                              sample: str) -> None:
    out = str(tmp_path / "out")
    document = run_json("rescale", sample, "-p", "3", "--out", out, *extra)
    result = document["result"]
    assert result["location"] == out
    assert result["mode"] == {0: "metadata", 1: "compact"}.get(len(extra), "rehash")
    if not extra:
        assert result["files_written"] == 0 and result["entries_written"] == 0
    verified = run_json("verify", out)
    assert verified["clean"] is True and verified["problems"] == []
    compared = run_json("diff", sample, out)
    assert compared["equal"] is True and compared["differences"] == []
    back = str(tmp_path / "back")
    run_json("rescale", out, "-p", "2", "--out", back,
             *(["--max-parallelism", "128"] if extra[:1] == ["--max-parallelism"] else []))
    assert run_json("diff", sample, back)["equal"] is True


def test_rescale_verify_and_diff_in_text(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    code, stdout, err = run("rescale", KEYED, "-p", "3", "--out", out)
    assert code == 0, err
    assert "parallelism 2 -> 3" in stdout and "skew" in stdout and "(metadata)" in stdout
    code, stdout, _ = run("verify", out)
    assert code == 0 and "clean: no problems found" in stdout
    code, stdout, _ = run("diff", KEYED, out)
    assert code == 0 and "hold the same state" in stdout
    code, stdout, _ = run("rescale", KEYED, "-p", "3", "--plan")
    assert code == 0 and "0-42" in stdout and "wrote" not in stdout


def test_drop_expired(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    document = run_json("rescale", KEYED, "-p", "2", "--out", out, "--drop-expired",
                        "--now", str(253402300799999))  # the last ms of year 9999
    assert document["result"]["mode"] == "compact"
    assert document["result"]["entries_dropped"] > 0
    difference = run_json("diff", KEYED, out, code=1)
    assert set(difference["counts"]) == {"removed"}
    assert {d["state"] for d in difference["differences"]} == {"recent_events"}  # the TTL one


def test_verify_finds_problems_exit_1(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(KEYED, broken)
    victim = next(p for p in sorted(broken.rglob("*.parquet")))
    victim.unlink()
    document = run_json("verify", str(broken), code=1)
    assert document["clean"] is False and document["counts"].get("missing-file") == 1
    code, stdout, _ = run("verify", str(broken))
    assert code == 1 and "missing-file" in stdout


def test_diff_finds_differences_exit_1_and_limit() -> None:
    document = run_json("diff", KEYED, OPERATOR, "--limit", "1", code=1)
    assert document["equal"] is False and len(document["differences"]) == 1
    assert document["total"] >= 2
    code, stdout, stderr = run("diff", KEYED, OPERATOR, "--limit", "1")
    # the note is a diagnostic: on stderr, the differences on stdout
    assert code == 1 and "--limit N shows more" in stderr and "--limit" not in stdout


@pytest.mark.parametrize("args", [
    ["rescale", KEYED, "-p", "3"],                                 # neither --out nor --plan
    ["rescale", KEYED, "-p", "2", "--plan", "--now", "5"],         # --now without drop
    ["rescale", KEYED, "--plan"],                                  # no parallelism
    ["rescale", KEYED, "-p", "three", "--plan"],                   # not an integer
    ["diff", KEYED],                                               # one side only
    ["diff", KEYED, KEYED, "--limit", "-1"],
    ["verify"],
])
def test_usage_errors_exit_2(args: list[str]) -> None:
    code, _, err = run(*args)
    assert code == 2 and "Traceback" not in err and "Error" in err


@pytest.mark.parametrize("args, message", [
    (["rescale", KEYED, "-p", "200", "--plan"], "lower than the parallelism"),
    (["rescale", KEYED, "-p", "0", "--plan"], "at least 1"),
    (["rescale", KEYED, "-p", "2", "--max-parallelism", "40000", "--plan"], "between 1 and"),
    (["rescale", "/no/such/checkpoint", "-p", "2", "--plan"], "not a checkpoint"),
    (["rescale", KEYED, "-p", "2", "--out", KEYED], "already exists"),
    (["verify", "/no/such/checkpoint"], "not a checkpoint"),
    (["diff", KEYED, "/no/such/checkpoint"], "not a checkpoint"),
])
@pytest.mark.parametrize("mode", ["text", "json"])
def test_domain_errors_exit_3(args: list[str], message: str, mode: str) -> None:
    code, out, err = run("--output", mode, *args)
    assert code == 3, (out, err)
    assert err.startswith("Error: ") and message in err and "Traceback" not in err
    assert out == ""
