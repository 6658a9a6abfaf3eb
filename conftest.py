"""Test-wide settings. The suite (and the notebooks nbval runs) replays recorded data unless
COURSE_MODE is set: on a GPU machine, `make gpu-test` is the live run."""
import os

os.environ.setdefault("COURSE_MODE", "replay")
os.environ.setdefault("MPLBACKEND", "Agg")
