# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP_CORE := $(VENV)/.aegis-core-installed
STAMP_ALL  := $(VENV)/.aegis-all-installed
DEMO_OUT ?= aegis-splits/synthetic-c

.PHONY: demo test lint typecheck matrix install venv bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# Reinstall only when the dependency declaration changes. The demo needs only the light core; the tests
# need everything, including the torch/ultralytics runner extra and the Dask extra (pinned in constraints.txt).
# setup.py and the C sources: the optional compiled engine loops are rebuilt when they change.
BUILD_INPUTS := pyproject.toml constraints.txt setup.py $(wildcard aegis_data/*/*.c)
$(STAMP_CORE): $(BUILD_INPUTS) | $(PY)
	$(PIP) install -q -c constraints.txt -e .
	touch $(STAMP_CORE)

# The tests also build zlib-ng in zlib-compat mode (a stand-in for another host's system zlib) from the
# sources vendored in the zlib-ng sdist, fetched here so that no test touches the network. Only its sources are
# used (the toolkit itself needs no zlib-ng): package 1.1.0 vendors zlib-ng 2.3.3. tests/data/engine/test_host_independence.py
# reads this line to find the file.
ZLIB_NG_VERSION := 1.1.0
$(STAMP_ALL): $(BUILD_INPUTS) | $(PY)
	$(PIP) install -q -c constraints.txt -e ".[runners,report,dev,distributed]"
	$(PIP) download -q --no-deps --no-binary :all: "zlib-ng==$(ZLIB_NG_VERSION)" -d $(VENV)/aegis-cache
	touch $(STAMP_ALL) $(STAMP_CORE)

venv: $(PY)
install: $(STAMP_ALL)

# Both suites: aegis-v2 (the default) against its committed reference, and aegis-v1, bit-identical forever.
demo: $(STAMP_CORE)
	$(VENV)/bin/aegis build-splits --out-dir $(DEMO_OUT)
	$(VENV)/bin/aegis verify $(DEMO_OUT)
	$(VENV)/bin/aegis verify $(DEMO_OUT) --against manifests/synthetic-c-v2.json
	$(VENV)/bin/aegis build-splits --suite aegis-v1 --out-dir $(DEMO_OUT)-v1
	$(VENV)/bin/aegis verify $(DEMO_OUT)-v1 --against manifests/synthetic-c.json

# Lint, format check and type check come first: they take seconds, the suite takes minutes. The suite runs under
# coverage, and fails below the floor in pyproject.toml ([tool.coverage.report] fail_under).
lint: $(STAMP_ALL)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: $(STAMP_ALL)
	$(PY) -m mypy

test: lint typecheck
	$(PY) -m pytest -q --cov --cov-report=term
	bash scripts/check_second_env.sh

# The determinism matrix's second environment (NumPy 1.26, another OpenCV minor) in a throwaway venv: it caught a
# NumPy-1.x-only promotion that moved 50 aegis-v2 golden hashes, which the project venv (NumPy 2) cannot see.
matrix:
	bash scripts/check_second_env.sh

# Each benchmark writes its section under docs/perf/; perfdoc.py assembles them into docs/PERFORMANCE.md.
bench: $(STAMP_ALL)
	$(PY) benchmarks/bench_corruptions.py
	$(PY) benchmarks/bench_corruptions.py --suite aegis-v2 --person-px 60 --out docs/perf/corruptions-v2.md
	$(PY) benchmarks/bench_sources.py
	$(PY) benchmarks/bench_build.py --suite aegis-v1 --write docs/perf/build.md
	$(PY) benchmarks/bench_build.py --write docs/perf/build-v2.md
	$(PY) benchmarks/bench_file_split.py --write docs/perf/file_split.md
	$(PY) benchmarks/bench_png.py --write docs/perf/png.md
	$(PY) benchmarks/bench_score.py --write docs/perf/score.md
	$(PY) benchmarks/bench_score.py --whole-process --images 1000 --write docs/perf/score_process.md
	$(PY) benchmarks/bench_score.py --tools --images 1000 --write docs/perf/score_tools.md
	$(PY) benchmarks/bench_score_sweep.py
	$(PY) benchmarks/bench_score_classes.py --write docs/perf/classes.md
	$(PY) benchmarks/bench_runners.py
	$(PY) benchmarks/bench_report.py --write docs/perf/report.md
	$(PY) benchmarks/bench_scale.py --write docs/perf/scale.md
	$(PY) benchmarks/perfdoc.py

clean:
	rm -rf $(VENV) aegis-splits .pytest_cache .mypy_cache .ruff_cache .coverage
