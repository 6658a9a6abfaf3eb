"""The live GPU run must really be live: the repo's conftest defaults to replay."""
from pathlib import Path


def test_gpu_test_script_forces_live_mode():
    script = (Path(__file__).resolve().parent.parent / "scripts" / "gpu_test.sh").read_text()
    assert "export COURSE_MODE=live" in script
    assert "--nbval-lax --nbval-current-env" in script
