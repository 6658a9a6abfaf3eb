"""The workshop image's recipe keeps its contract: an NVIDIA CUDA base image, the course installed by
its own Makefile (so the image has exactly the pins), a non-root user, JupyterLab on the learner's
working copy as the entry point. The image itself is not built here (see the Dockerfile's header)."""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def instructions() -> list[tuple[str, str]]:
    lines = [ln.strip() for ln in (ROOT / "Dockerfile").read_text().replace("\\\n", " ").splitlines()]
    return [tuple(ln.split(None, 1)) for ln in lines if ln and not ln.startswith("#")]


def test_the_image_is_built_on_cuda_13_and_installs_with_the_makefile():
    ins = instructions()
    assert ins[0][0] == "FROM" and ins[0][1].startswith("nvidia/cuda:13.")
    runs = " ".join(arg for op, arg in ins if op == "RUN")
    assert "make setup" in runs and "work/.copied" in runs


def test_it_runs_jupyterlab_as_a_user_who_is_not_root():
    ins = instructions()
    users = [arg for op, arg in ins if op == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert [op for op, _ in ins].index("USER") < [op for op, _ in ins].index("CMD")
    assert dict(ins)["CMD"] == '["make", "lab", "IP=0.0.0.0", "NO_BROWSER=1"]'


def test_the_build_context_leaves_out_the_local_environment():
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv/", "work/", ".whl/"} <= set(ignored)
