#!/usr/bin/env bash
# The notebook stack (ipykernel, nbclient, nbval, ipywidgets, ...) as Python 3.12 wheels
# for a GPU host that has CUDA, CuPy and PyTorch but no internet.
#
#   scripts/gpu_host_wheels.sh download   # on a machine with internet: fills .whl/
#   scripts/gpu_host_wheels.sh install    # on the GPU host: installs .whl/ into $SITE, prints the PYTHONPATH to use
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=.whl
SITE=${SITE:-/tmp/course-site}
PYVER=${PYVER:-3.12}
# What the notebooks need beyond the GPU host's own CUDA/CuPy/PyTorch/matplotlib/pytest.
PACKAGES=(nbval==0.11.0 nbclient==0.11.0 nbformat==5.10.4 ipykernel==7.4.0 ipywidgets==8.1.9 tqdm==4.70.1
          nvidia-ml-py==13.580.126)
# Already on the GPU image; a second copy on PYTHONPATH would shadow it.
SKIP='^(pytest|pluggy|iniconfig|packaging|pygments|python_dateutil|six|psutil|attrs|coverage|typing_extensions|setuptools|numpy)-'

case "${1:-}" in
download)
  rm -rf "$WHEELS.tmp" && mkdir -p "$WHEELS.tmp"
  python3 -m pip download -q --only-binary=:all: --python-version "$PYVER" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$WHEELS.tmp" "${PACKAGES[@]}"
  rm -rf "$WHEELS" && mkdir -p "$WHEELS"
  for w in "$WHEELS".tmp/*.whl; do basename "$w" | grep -Eiq "$SKIP" || mv "$w" "$WHEELS/"; done
  rm -rf "$WHEELS.tmp"
  echo "$(ls "$WHEELS" | wc -l) wheels, $(du -sh "$WHEELS" | cut -f1) in $WHEELS/"
  ;;
install)
  ls "$WHEELS"/*.whl >/dev/null 2>&1 || { echo "no wheels in $WHEELS/: run '$0 download' on a machine with internet" >&2; exit 1; }
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHEELS"/*.whl
  echo "export PYTHONPATH=$SITE:$(pwd)"
  ;;
*)
  echo "usage: $0 download|install" >&2; exit 2 ;;
esac
