import pytest

from course_lib.measure import profiler

SAMPLE = '''==PROF== Connected to process 123
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","123","python3","127.0.0.1","copy","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","8,388,608"
"0","123","python3","127.0.0.1","copy","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","87.5"
"1","123","python3","127.0.0.1","strided","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","33554432"
==PROF== Disconnected from process 123
'''


def test_parse_csv_groups_metrics_by_launch():
    p = profiler.parse_csv(SAMPLE)
    assert [x.kernel for x in p] == ["copy", "strided"]
    assert p[0].metrics["dram__bytes_read.sum"] == 8388608.0
    assert p[0].metrics["sm__warps_active.avg.pct_of_peak_sustained_active"] == 87.5
    assert p[0].units["dram__bytes_read.sum"] == "byte" and p[0].block == "(256, 1, 1)"


def test_no_ncu_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(profiler, "ncu_path", lambda: None)
    with pytest.raises(profiler.ProfilerUnavailable, match="not installed"):
        profiler.ncu_metrics("pass", ["dram__bytes_read.sum"])
