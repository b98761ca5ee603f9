"""The ``hosts`` bench section (``python -m flowjit.bench.hosts``) runs end to end, on few
steps: every row is there, each program's result was checked against the same program in one
process before it was timed (a wrong one raises), a killed task was noticed and restarted, and
the 10-variable model recovered to the loss it had before the fault.  Its timings are the
bench's to report, not this test's."""

import json

import pytest

from conftest import needs_ray

pytestmark = [needs_ray, pytest.mark.xdist_group("ray")]


def test_the_hosts_bench_runs_every_row_checked(ray_session, tmp_path, capsys):
    from flowjit.bench import hosts
    path = tmp_path / "hosts.json"
    assert hosts.main(["--steps", "3", "--json", str(path)]) == 0
    results = json.loads(path.read_text())
    assert list(results) == ["pipeline, 1 op(s) per stage, f32[256]", "pipeline, 64 op(s) per stage, f32[256]",
                             "branches, 2 x f32[2M] heavy chains", "faults",
                             "recovery, 10-variable model, task killed"]
    assert all(value > 0 for figures in results.values() for value in figures.values()), results
    assert results["faults"]["kill_detected_s"] < 2.0                       # (issue 18's bound)
    assert results["recovery, 10-variable model, task killed"]["variables"] == 10
    printed = capsys.readouterr().out.splitlines()             # (after Ray's own lines, if any)
    table = printed[next(index for index, line in enumerate(printed) if line.startswith("hosts (local Ray")):]
    assert [line.split(":")[0].strip() for line in table[1:1 + len(results)]] == list(results)
    assert "speedup" in table[3]
