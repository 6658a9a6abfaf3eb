"""The registry of smoke launches: one small, checked launch for every course kernel.

A module that owns kernels registers a smoke function for them with ``@covers(family, kernel, ...)``;
``python -m course_lib.sanitize`` runs them all under compute-sanitizer. This registry sits at the
bottom of the library (it imports nothing of the course) so that any module can register."""
from __future__ import annotations

from typing import Callable

SMOKE: dict[tuple[str, str], Callable[[], None]] = {}


def covers(family: str, *kernels: str):
    def register(fn):
        for k in kernels:
            SMOKE[(family, k)] = fn
        return fn
    return register
