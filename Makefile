# The course's commands. `make lab` and `make test` are the README's two commands:
# each creates (or reuses) .venv, installs the pinned requirements, then does its job.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup lab test sync record gpu-test gpu-wheels sanitize clean

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "Python 3.10 or newer is needed"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $(STAMP)

setup: $(STAMP)

lab: $(STAMP)
	$(VENV)/bin/jupyter lab notebooks/

test: $(STAMP)
	$(PY) -m pytest tests/ notebooks/ --nbval-lax -q

# After editing a notebook's text source (notebooks/NN_name.md): update its .ipynb. Prose edits keep
# the outputs; a changed code cell loses its outputs and must be run on a GPU (make gpu-test).
sync: $(STAMP)
	$(PY) scripts/sync_notebooks.py

record: $(STAMP)
	$(PY) -m course_lib.record

# On a CUDA machine: every notebook (or NOTEBOOKS=...) executed live, outputs written back, then nbval live.
gpu-test:
	bash scripts/gpu_test.sh $(NOTEBOOKS)

# On a CUDA machine: every kernel once under compute-sanitizer (memcheck, racecheck, synccheck, initcheck).
sanitize:
	bash scripts/sanitize.sh

# Download the notebook stack as wheels for a GPU host without internet (see README).
gpu-wheels:
	bash scripts/gpu_host_wheels.sh download

clean:
	rm -rf $(VENV) .pytest_cache
