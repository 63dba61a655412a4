# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.aegis-installed
DEMO_OUT ?= aegis-splits/synthetic-c

.PHONY: demo test install venv bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade "pip>=23"

# Reinstall only when the dependency declaration changes.
$(STAMP): pyproject.toml constraints.txt | $(PY)
	$(PIP) install -q -c constraints.txt -e ".[runners,report,dev]"
	touch $(STAMP)

venv: $(PY)
install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/aegis build-splits --out $(DEMO_OUT)
	$(VENV)/bin/aegis verify $(DEMO_OUT)

test: $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/bench_corruptions.py
	$(PY) benchmarks/bench_build.py
	$(PY) benchmarks/bench_score.py
	$(PY) benchmarks/bench_runners.py

clean:
	rm -rf $(VENV) aegis-splits .pytest_cache
