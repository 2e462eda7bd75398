"""Every command fails the same way (issue 41, acceptance): ``--output json`` on a missing path,
a damaged snapshot (a copy with a truncated file) and a bad option.

Each gives the exit code docs/cli.md's table says (2 a usage error, 3 bad input: a missing
path or a damaged snapshot; ``verify`` reports damage as findings, 1), exactly one line on
stderr (``Error: ...``), no traceback, and a stdout that is empty or exactly one JSON document.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from cli_support import KEYED, run

#: ``{src}``: the input of the case; ``{out}``: a fresh output path; ``{ok}``: a good snapshot.
COMMANDS: dict[str, list[str]] = {
    "build": ["build", "{input}", "--key", "user", "--agg", "count", "--checkpoint-dir",
              "{out}"],
    "snapshot take": ["snapshot", "take", "{state}"],
    "snapshot list": ["snapshot", "list", "{state}"],
    "snapshot release": ["snapshot", "release", "{state}", "1"],
    "rescale": ["rescale", "{src}", "-p", "3", "--out", "{out}"],
    "rescale --plan": ["rescale", "{src}", "-p", "3", "--plan"],
    "convert": ["convert", "{src}", "--out", "{out}"],
    "inspect": ["inspect", "{src}"],
    "inspect --all": ["inspect", "{src}", "--all"],
    "verify": ["verify", "{src}"],
    "diff (first)": ["diff", "{src}", "{ok}"],
    "diff (second)": ["diff", "{ok}", "{src}"],
    "export": ["export", "{src}", "--out", "{out}"],
    "query": ["query", "{src}", "SELECT count(*) FROM statectl.states"],
    "history": ["history", "{state}", "--key", "user-1"],
    "browse --svg": ["browse", "{src}", "--svg", "{out}.svg"],
    "trace": ["trace", "{script}"],
}

#: What docs/cli.md's exit-code table says for each case (``verify``: damage is a finding).
EXPECTED = {"missing": 3, "damaged": 3, "bad option": 2}
FINDINGS = {("damaged", "verify"): 1}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """Per case, what each placeholder stands for."""
    root = tmp_path_factory.mktemp("failures")
    (root / "in.csv").write_text("user,amount\nuser-1,1\nuser-2,2\n")
    code, _, err = run("build", str(root / "in.csv"), "--key", "user", "--agg", "count",
                       "--checkpoint-dir", str(root / "state"))
    assert code == 0, err
    damaged = root / "damaged"  # a snapshot whose _metadata.json was cut short
    shutil.copytree(KEYED, damaged)
    metadata = damaged / "_metadata.json"
    metadata.write_bytes(metadata.read_bytes()[:300])
    state = root / "damaged-state"  # a state directory whose checkpoint was cut short
    shutil.copytree(root / "state", state)
    for path in state.glob("chk-*/_metadata.json"):
        path.write_bytes(path.read_bytes()[:50])
    data = root / "damaged.parquet"  # an input file cut short
    data.write_bytes(next(Path(KEYED).rglob("*.parquet")).read_bytes()[:40])
    script = root / "damaged.trace"  # a script that is no text
    script.write_bytes(b"put 1 \xff\xfe\x00")
    good = {"ok": KEYED, "out": str(root / "out")}
    missing = str(root / "no-such-path")
    return {
        "missing": {**good, "src": missing, "state": missing, "input": missing + ".csv",
                    "script": missing},
        "damaged": {**good, "src": str(damaged), "state": str(state), "input": str(data),
                    "script": str(script)},
        "bad option": {**good, "src": KEYED, "state": str(root / "state"),
                       "input": str(root / "in.csv"), "script": "-"},
    }


@pytest.mark.parametrize("case", list(EXPECTED))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_fails_with_its_code_one_line_and_json_or_nothing(
        command: str, case: str, inputs: dict[str, dict[str, str]], tmp_path: Path) -> None:
    values = {**inputs[case], "out": str(tmp_path / "out")}
    args = [re.sub(r"\{(\w+)\}", lambda m: values[m[1]], a) for a in COMMANDS[command]]
    if case == "bad option":
        args.append("--no-such-option")
    code, out, err = run("--output", "json", *args)
    assert code == FINDINGS.get((case, command), EXPECTED[case]), (args, code, out, err)
    assert "Traceback" not in err and "Traceback" not in out, err
    assert err.count("\n") == 1 and err.startswith("Error: ") if code != 1 else err == "", err
    if out:
        json.loads(out)  # one document: json.loads refuses anything after it
    if case == "missing":
        assert "no-such-path" in err and "does not exist" in err, err
