"""A live experiment shows a progress bar that names each timing and profile; replay shows none."""
import pytest

from course_lib.core import progress
from course_lib.measure import experiments


def test_outside_an_experiment_a_step_does_nothing():
    progress.step("timing")
    assert progress.current_label() is None


@pytest.fixture
def notebook(monkeypatch):
    """As in a notebook: the bar writes its line to a display area (recorded here)."""
    shown = []

    class Handle:
        def update(self, data, raw):
            shown.append(data["text/plain"])

    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: Handle())
    monkeypatch.setattr(progress, "_in_notebook", lambda: True)
    monkeypatch.delenv("COURSE_PROGRESS", raising=False)
    return shown


def test_a_bar_counts_and_names_its_steps_and_closes_with_the_experiment(notebook):
    with progress.measuring("waves.n_sweep on NVIDIA L4"):
        progress.step("timing 2 calls in turn, 30 samples each")
        with progress.measuring("an inner experiment"):   # shares the outer bar
            progress.step("Nsight Compute: 4 metrics per kernel")
        assert progress.current_label() == "waves.n_sweep on NVIDIA L4: Nsight Compute: 4 metrics per kernel"
        assert progress._bar.n == 2
    assert progress.current_label() is None


def test_course_progress_0_turns_it_off(monkeypatch):
    monkeypatch.setenv("COURSE_PROGRESS", "0")
    with progress.measuring("x"):
        progress.step("timing")
        assert progress.current_label() is None


def test_run_live_wraps_the_experiment_in_a_bar(monkeypatch, notebook):
    seen = []

    @experiments.experiment("test.progress_probe", "a probe of the bar", n=1)
    def probe(n):
        progress.step("timing one kernel, 30 samples")
        seen.append(progress.current_label())
        return []

    monkeypatch.setattr(experiments, "machine_manifest", lambda: {"gpu": "NVIDIA L4", "slug": "l4"})
    monkeypatch.setattr(experiments.session, "gpu_state", lambda: {})
    try:
        result = experiments.run_live("test.progress_probe", {"n": 1})
    finally:
        experiments.REGISTRY.pop("test.progress_probe")
    assert seen == ["test.progress_probe on NVIDIA L4: timing one kernel, 30 samples"]
    assert result.reference is None and progress.current_label() is None


def test_in_a_notebook_the_bar_is_a_line_in_the_cell_that_clears_itself(notebook):
    with progress.measuring("fusion.reductions on NVIDIA H200"):
        progress.step("timing 5 calls in turn, 20 samples each")
    assert any("fusion.reductions on NVIDIA H200" in line for line in notebook)
    assert notebook[-1] == ""   # closed with leave=False: nothing stays in the saved notebook


def test_a_terminal_whose_stderr_is_a_log_gets_no_bar(monkeypatch):
    import io
    import sys

    monkeypatch.delenv("COURSE_PROGRESS", raising=False)
    monkeypatch.setattr(progress, "_in_notebook", lambda: False)
    log = io.StringIO()   # not a TTY
    monkeypatch.setattr(sys, "stderr", log)
    with progress.measuring("pipeline.streaming on NVIDIA H200"):
        progress.step("timing")
        assert progress.current_label() is None
    assert log.getvalue() == ""
