# The course's commands. `make lab` and `make test` are the README's two commands:
# each creates (or reuses) .venv, installs the pinned requirements, then does its job.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup lab test record gpu-test gpu-wheels sanitize clean

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

record: $(STAMP)
	$(PY) -m course_lib.record

# On a CUDA machine: every notebook executed live under nbval, outputs written back.
gpu-test:
	bash scripts/gpu_test.sh

# On a CUDA machine: every kernel once under compute-sanitizer (memcheck, racecheck, synccheck, initcheck).
sanitize:
	bash scripts/sanitize.sh

# Download the notebook stack as wheels for a GPU host without internet (see README).
gpu-wheels:
	bash scripts/gpu_host_wheels.sh download

clean:
	rm -rf $(VENV) .pytest_cache
