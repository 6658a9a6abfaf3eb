import pytest

from course_lib import runtime


def env(**kw):
    base = dict(mode="replay", gpu=None, compute_capability=None, driver=None, cuda_runtime="12.9",
                nvrtc="12.9", cupy="14.2.0", torch=None)
    return runtime.Environment(**(base | kw))


def test_no_driver_is_explained_as_replay():
    msg = runtime.diagnose("cudaErrorInsufficientDriver: CUDA driver version is insufficient", env())
    assert "No NVIDIA driver" in msg and "replays" in msg


def test_old_driver_is_explained():
    msg = runtime.diagnose("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime "
                           "version", env(driver="11.8"))
    assert "older than CuPy's CUDA runtime (12.9)" in msg and "Update the driver" in msg


def test_missing_nvrtc_headers_are_explained():
    msg = runtime.diagnose("catastrophic error: cannot open source file \"cuda_fp16.h\"", env(driver="12.4"))
    assert "NVRTC" in msg


def test_course_mode_is_validated(monkeypatch):
    monkeypatch.setenv("COURSE_MODE", "fast")
    with pytest.raises(ValueError, match="COURSE_MODE"):
        runtime.mode()


def test_replay_is_forced_by_course_mode(monkeypatch):
    monkeypatch.setenv("COURSE_MODE", "replay")
    assert runtime.mode() == "replay" and not runtime.gpu_available()


def test_banner_prints_mode_and_versions(capsys):
    e = runtime.banner()
    out = capsys.readouterr().out
    assert "REPLAY mode" in out and "NVRTC" in out and e.nvrtc in out
