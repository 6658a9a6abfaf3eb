"""course_lib: the small helper library under the GPU performance course.

Layers, bottom up, each a folder with one rule (``pyproject.toml``'s import contracts hold them):
``core`` (runtime, spec table, NVRTC, timing) < ``models`` (pure, by concept) < ``measure`` (the
experiment framework and its evidence) < ``launch`` (one host launcher per kernel family) <
``figures`` < ``labs`` (one per notebook) < ``exercises`` < ``widgets``. Entry points sit here:
``magic`` (``%%cuda_exercise``), ``record`` and ``sanitize``.
"""

__version__ = "0.1.0"
