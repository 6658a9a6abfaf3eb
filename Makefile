# The course's commands. `make lab` and `make test` are the README's two commands:
# each creates (or reuses) .venv, installs the pinned requirements, then does its job.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: setup lab reset test sync render record gpu-test gpu-wheels sanitize clean

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11 or newer is needed (numpy 2.4 and torch 2.13 need it)"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	@# The build backend's one notice about editable installs (not an error) would read as a failed install.
	PYTHONWARNINGS=ignore $(PY) -m pip install -q --no-deps -e .
	touch $(STAMP)

setup: $(STAMP)

# The learner works in work/ (ignored by git): copies of the committed notebooks (scripts/learner_copy.py),
# trusted so their calculators are drawn from the saved widget state on open, with this installation's
# kernel metadata so opening one does not mark it unsaved, and no text sources beside them (so jupytext
# rewrites nothing). notebooks/ stays as recorded; `make reset` starts work/ over.
# JupyterLab's news and update pop-ups are off (overrides.json in the venv).
# make lab PORT=8890 IP=0.0.0.0 NO_BROWSER=1 on a remote VM; as root (Docker, cloud VMs, Colab) it adds --allow-root.
PORT ?= 8888
IP ?= 127.0.0.1
WORK ?= work
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings/overrides.json

$(WORK)/.copied: | $(STAMP)
	$(PY) scripts/learner_copy.py $(WORK)
	touch $@

$(LAB_SETTINGS): | $(STAMP)
	mkdir -p $(dir $@)
	printf '%s\n' '{"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": false}}' > $@

lab: $(STAMP) $(WORK)/.copied $(LAB_SETTINGS)
	$(VENV)/bin/jupyter lab $(WORK)/ --ip=$(IP) --port=$(PORT) $(if $(NO_BROWSER),--no-browser) \
	  $$([ "$$(id -u)" = 0 ] && echo --allow-root)

# Throws away the learner's runs and edits in work/ and copies the committed notebooks again.
reset:
	rm -rf $(WORK)
	$(MAKE) $(WORK)/.copied

# The test tools (pytest, nbval, Playwright) come with `make test`, not with the learner's `make lab`.
$(TEST_STAMP): $(STAMP) requirements-test.txt
	$(PY) -m pip install -q -r requirements-test.txt
	touch $(TEST_STAMP)

test: $(TEST_STAMP)
	$(PY) -m pytest tests/ notebooks/ --nbval-lax -q

# After editing a notebook's text source (notebooks/NN_name.md): update its .ipynb. Prose edits keep
# the outputs; a changed code cell loses its outputs until `make render` draws them again.
sync: $(STAMP)
	$(PY) scripts/sync_notebooks.py

# No GPU: every notebook (or NOTEBOOKS=...) executed again against the GPU run stored in it, with today's
# library, its outputs written back. A cell the stored run cannot answer (a changed kernel, an experiment or
# parameter never measured) stops it with NotInStoredRun: that notebook needs a live run (make gpu-test).
render: $(STAMP)
	$(PY) -m course_lib.render $(NOTEBOOKS)

record: $(STAMP)
	$(PY) -m course_lib.record

# On a CUDA machine: every notebook (or NOTEBOOKS=...) executed live, its run stored in it, then nbval live.
# Then, where the course's pinned packages are installed, `make render` draws the committed outputs from it.
# Both use the course's .venv where it exists (a GPU host without one uses its own python3).
HOST_PY = $(if $(wildcard $(PY)),$(abspath $(PY)),python3)

gpu-test:
	PY=$(HOST_PY) bash scripts/gpu_test.sh $(NOTEBOOKS)

# On a CUDA machine: every kernel once under compute-sanitizer (memcheck, racecheck, synccheck, initcheck).
sanitize:
	PY=$(HOST_PY) bash scripts/sanitize.sh

# Download the notebook stack as wheels for a GPU host without internet (see README).
gpu-wheels:
	bash scripts/gpu_host_wheels.sh download

clean:
	rm -rf $(VENV) .pytest_cache
