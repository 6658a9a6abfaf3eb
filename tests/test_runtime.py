import pytest

from course_lib.core import runtime, session


def env(**kw):
    base = dict(mode="replay", gpu=None, compute_capability=None, driver=None, cuda_runtime="12.9",
                nvrtc="12.9", cupy="14.2.0", torch=None)
    return session.Environment(**(base | kw))


def test_no_driver_is_explained_as_replay():
    msg = session.diagnose("cudaErrorInsufficientDriver: CUDA driver version is insufficient", env())
    assert "No NVIDIA driver" in msg and "replays" in msg


def test_old_driver_is_explained():
    msg = session.diagnose("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime "
                           "version", env(driver="11.8"))
    assert "older than CuPy's CUDA runtime (12.9)" in msg and "Update the driver" in msg


def test_missing_nvrtc_headers_are_explained():
    msg = session.diagnose("catastrophic error: cannot open source file \"cuda_fp16.h\"", env(driver="12.4"))
    assert "NVRTC" in msg


def test_course_mode_is_validated(monkeypatch):
    monkeypatch.setenv("COURSE_MODE", "fast")
    with pytest.raises(ValueError, match="COURSE_MODE"):
        runtime.mode()


def test_replay_is_forced_by_course_mode(monkeypatch):
    monkeypatch.setenv("COURSE_MODE", "replay")
    assert runtime.mode() == "replay" and not runtime.gpu_available()


def test_replay_gpu_follows_the_environment(monkeypatch):
    monkeypatch.setenv("COURSE_REPLAY_GPU", "a100-sxm")
    assert runtime.replay_gpu() == "a100-sxm"


def test_banner_prints_mode_and_versions(capsys):
    e = session.banner()
    out = capsys.readouterr().out
    assert "REPLAY mode" in out and "NVRTC" in out and e.nvrtc in out


def test_live_outputs_carry_the_date_they_were_measured():
    assert session.utc_label("2026-12-03T14:05:09Z") == "2026-12-03 14:05 UTC"


def test_clock_warning_only_far_below_the_maximum():
    assert session.clock_warning({"sm_mhz": 1980, "max_sm_mhz": 1980}) is None
    assert session.clock_warning({}) is None
    low = session.clock_warning({"sm_mhz": 1200, "max_sm_mhz": 1980})
    assert "1200 MHz" in low and "61%" in low


def test_on_colab_the_banner_turns_on_its_widget_manager(monkeypatch, capsys):
    import sys
    import types

    calls = []
    colab = types.ModuleType("google.colab")
    colab.output = types.SimpleNamespace(enable_custom_widget_manager=lambda: calls.append("on"))
    monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    session.banner()
    assert calls == ["on"] and "custom widget manager is on" in capsys.readouterr().out
    monkeypatch.delitem(sys.modules, "google.colab")
    session.banner()
    assert calls == ["on"] and "Colab" not in capsys.readouterr().out
