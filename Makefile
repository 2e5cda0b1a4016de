# The two commands of the README: `make demo` and `make test`. Each creates or updates .venv first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.capjax-installed
WORKDIR ?= workdir/shapes
DEMO_CONFIG ?= configs/t2t.py:shapes

.PHONY: demo test venv clean

venv: $(STAMP)

# Re-install whenever the dependency pins change.
$(STAMP): setup.cfg constraints.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[test,beam]'  # every extra the tests use
	$(PY) -m capjax.setup_nltk
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m capjax.main --config=$(DEMO_CONFIG) --workdir=$(WORKDIR)

test: $(STAMP)
	$(PY) -m pytest -q tests

clean:
	rm -rf $(VENV) workdir
