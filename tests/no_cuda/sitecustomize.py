"""Put this folder on PYTHONPATH to run Python as on a machine with no CUDA wheels (macOS, Windows
without a GPU stack): CuPy, cuda-bindings (NVRTC) and the nvidia-* wheels cannot be imported."""
import sys

HIDDEN = {"cupy", "cupy_backends", "cupyx", "cuda", "nvidia", "fastrlock"}


class _HideCuda:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r} (hidden: no CUDA packages)", name=name)
        return None


sys.meta_path.insert(0, _HideCuda())
