# A workshop image: the course with its pinned packages, JupyterLab as the entry point, a non-root user.
#   docker build -t gpu-course .
#   docker run --gpus all -p 8888:8888 gpu-course      # then open the URL it prints
# UNTESTED: no container registry is reachable from the course's CI machines, so this image has never
# been built there (tests/test_dockerfile.py only checks the recipe's shape). The CUDA 13 wheels need a
# host driver of version 580 or newer and the NVIDIA Container Toolkit.
FROM nvidia/cuda:13.0.0-runtime-ubuntu24.04
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv make git \
 && rm -rf /var/lib/apt/lists/*
RUN useradd --create-home learner
USER learner
WORKDIR /home/learner/course
COPY --chown=learner . .
RUN make setup work/.copied .venv/share/jupyter/lab/settings/overrides.json
EXPOSE 8888
CMD ["make", "lab", "IP=0.0.0.0", "NO_BROWSER=1"]
