# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP_CORE := $(VENV)/.aegis-core-installed
STAMP_ALL  := $(VENV)/.aegis-all-installed
DEMO_OUT ?= aegis-splits/synthetic-c

.PHONY: demo test install venv bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# Reinstall only when the dependency declaration changes. The demo needs only the light core; the tests
# need everything, including the torch/ultralytics runner extra (pinned in constraints.txt).
$(STAMP_CORE): pyproject.toml constraints.txt | $(PY)
	$(PIP) install -q -c constraints.txt -e .
	touch $(STAMP_CORE)

$(STAMP_ALL): pyproject.toml constraints.txt | $(PY)
	$(PIP) install -q -c constraints.txt -e ".[runners,report,dev]"
	touch $(STAMP_ALL) $(STAMP_CORE)

venv: $(PY)
install: $(STAMP_ALL)

demo: $(STAMP_CORE)
	$(VENV)/bin/aegis build-splits --out $(DEMO_OUT)
	$(VENV)/bin/aegis verify $(DEMO_OUT)
	$(VENV)/bin/aegis verify $(DEMO_OUT) --against manifests/synthetic-c.json

test: $(STAMP_ALL)
	$(PY) -m pytest -q

# Each benchmark writes its section under docs/perf/; perfdoc.py assembles them into docs/PERFORMANCE.md.
bench: $(STAMP_ALL)
	$(PY) benchmarks/bench_corruptions.py
	$(PY) benchmarks/bench_sources.py
	$(PY) benchmarks/bench_build.py --write docs/perf/build.md
	$(PY) benchmarks/bench_score.py --write docs/perf/score.md
	$(PY) benchmarks/bench_score_sweep.py
	$(PY) benchmarks/bench_score_classes.py --write docs/perf/classes.md
	$(PY) benchmarks/bench_runners.py
	$(PY) benchmarks/bench_report.py --write docs/perf/report.md
	$(PY) benchmarks/perfdoc.py

clean:
	rm -rf $(VENV) aegis-splits .pytest_cache
