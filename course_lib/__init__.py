"""course_lib: the small helper library under the GPU performance course.

Models (``roofline``, ...) are pure and need no GPU. ``cuda`` compiles with
NVRTC (no GPU needed) and launches through CuPy. ``experiments`` runs live on a
GPU or replays records from ``data/recorded/``.
"""

__version__ = "0.1.0"
