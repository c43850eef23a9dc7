# Set-up, tests and documentation of experimental_experiment.
# Every target that needs Python installs the virtual environment first (once).

VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
# torch must stay pinned: an unpinned requirement would pull a huge CUDA build.
CONSTRAINTS := constraints.txt
# exact versions 'make test' and 'make html' passed with (every transitive package)
LOCK := requirements-lock.txt
# canary: the newest releases of the packages we follow, torch kept at 2.13.0
VENV_LATEST := .venv-latest
LATEST_PACKAGES := transformers diffusers onnx onnxruntime onnxscript onnx-ir sphinx-gallery
# python3.11 when it runs (a pyenv shim may exist without the version), else python3
BOOT_PYTHON := $(shell for p in python3.11 python3; do \
	if $$p -c 'import venv' >/dev/null 2>&1; then command -v $$p; break; fi; done)

.PHONY: install test html html-quick site-check lint clean coverage bench-optim bench-optim-real bench-large bench-constructs bench-export-time bench-llm zoo zoo-quick lock test-latest

install: $(STAMP)

$(PY):
	$(BOOT_PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml $(CONSTRAINTS) $(LOCK) | $(PY)
	$(PIP) install -c $(CONSTRAINTS) torch==2.13.0
	$(PIP) install -c $(CONSTRAINTS) -r $(LOCK)
	$(PIP) install --no-deps -e .
	$(PIP) check
	touch $(STAMP)

# rewrites the lock file from .venv (after upgrading a package and passing test + html)
lock: install
	{ sed -n '1,/^# torch stays/p' $(LOCK); \
	  $(PIP) freeze --exclude-editable | sed 's/^torch==2.13.0+cpu$$/torch==2.13.0/'; \
	} > $(LOCK).tmp && mv $(LOCK).tmp $(LOCK)

# canary against the newest upstream releases, in its own environment (not part of CI):
# LLM, patch and dynamic-cache tests, the gallery scripts, a sample of the operator
# coverage; prints a table and writes _doc/compatibility_canary.json
test-latest:
	test -x $(VENV_LATEST)/bin/python || $(BOOT_PYTHON) -m venv $(VENV_LATEST)
	$(VENV_LATEST)/bin/pip install -c $(CONSTRAINTS) torch==2.13.0
	$(VENV_LATEST)/bin/pip install -c $(CONSTRAINTS) -e ".[test,doc]"
	$(VENV_LATEST)/bin/pip install -c $(CONSTRAINTS) -U $(LATEST_PACKAGES)
	$(VENV_LATEST)/bin/python tools/canary.py \
		--output _doc/compatibility_canary.json

# pytest exits with 5 when it collects no test: reported, not a failure.
test: install
	$(PY) -m pytest _unittests -n 2 -q --durations=20 || { rc=$$?; \
		if [ $$rc -eq 5 ]; then echo "WARNING: pytest collected no test"; else exit $$rc; fi; }

# checks of check_html.py whose problems are listed without failing the build (none:
# every check holds; add "--allow NAME" here only while a fix is on its way)
CHECK_HTML_ALLOW :=

html: install
	$(PY) -m sphinx -M html _doc _doc/_build -W -j 1
	$(PY) _doc/check_html.py _doc/_build/html $(CHECK_HTML_ALLOW)

# quick build: the gallery scripts are not executed (their pages show the code only,
# their thumbnails are sphinx-gallery's placeholder)
html-quick: install
	$(PY) -m sphinx -M html _doc _doc/_build_quick -W -j 1 -D plot_gallery=0
	$(PY) _doc/check_html.py _doc/_build_quick/html $(CHECK_HTML_ALLOW) \
		--allow placeholder-thumbnail

# the built site in headless Chromium (tools/site_check.py, about a minute): the landing
# page's comparison table, search, images, no JavaScript error; installs Debian's
# chromium and chromium-driver when missing (root), else says what to run
site-check: install
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update && apt-get install -y chromium chromium-driver; \
		else \
			echo "site-check: run 'sudo apt-get update && sudo apt-get install -y chromium chromium-driver'"; \
			exit 1; \
		fi; \
	fi
	$(PY) tools/site_check.py _doc/_build/html

# operator coverage on PyTorch's OpInfo database, both exporters (about 20 minutes)
coverage: install
	$(PY) -m experimental_experiment.bench.op_coverage --exporters to_onnx,torch.onnx \
		--samples 2 --dtype float32 --no-progress --output _doc/bench/op_coverage.csv

# node count and onnxruntime latency of optimized models vs torch.onnx.export (~5 minutes)
bench-optim: install
	$(PY) -m experimental_experiment.bench.optim_speed --repeat 300 --warmup 20 \
		--output _doc/bench/optim_speed.csv

# the real-size models of bench-export-time: onnxruntime latency per exporter
bench-optim-real: install
	$(PY) -m experimental_experiment.bench.optim_speed --repeat 30 --warmup 3 \
		--model vit,swin,mobilevit,convnext,resnet,llama-512,llama-1024 \
		--variant "to_onnx default,to_onnx default+ort,torch.onnx,eager" \
		--output _doc/bench/optim_speed_real.csv

# large models: 8B weight-free, 70B graph, >2 GB round trip, ~1B Llama vs torch.onnx.export
# (15-20 minutes, about 6 GB of free memory and 20 GB of disk, sparse data files)
bench-large: install
	$(PY) -m experimental_experiment.bench.large_model --out _doc/bench/large_model.csv

# constructs (star args, complex, vmap, custom ops) with both exporters (~2 minutes)
bench-constructs: install
	$(PY) -m experimental_experiment.bench.constructs --output _doc/bench/constructs.csv
	$(PY) -m experimental_experiment.bench.control_flow --output _doc/bench/control_flow.csv

# LLM latency against onnxruntime-genai's builder (installed apart, ~15 min):
# pip install --no-deps --target $(GENAI_PATH) onnxruntime-genai
GENAI_PATH ?= /tmp/genai
bench-llm: install
	$(PY) -m experimental_experiment.bench.llm_latency --sizes small,medium --threads 1,2 \
		--repeat 8 --decode-repeat 60 --genai-path $(GENAI_PATH) \
		--output _doc/bench/llm_latency.csv --profile-output _doc/bench/llm_latency_profile.csv

# export time at real sizes (vision models, small LLMs), one process per case (~40 min)
bench-export-time: install
	$(PY) -m experimental_experiment.bench.export_time --csv _doc/bench/export_time.csv

# model zoo: every transformers model type, both exporters, two cases at a time (resumable:
# rerun to fill the missing types, delete the CSV to start over)
zoo: install
	nice -n 19 $(PY) -m experimental_experiment.bench.zoo --output _doc/bench/zoo.csv \
		--timeout 90 --jobs 2 --commit $$(git rev-parse HEAD)

# 10 representative model types with to_onnx (about 3 minutes, run by .ci/run);
# fails when one of them fails
zoo-quick: install
	$(PY) -m experimental_experiment.bench.zoo --quick --exporters to_onnx --strict \
		--output $$(mktemp -d)/zoo_quick.csv

# ruff (check and format) on the whole tree, pyright (basic, pyproject.toml) with a per-file ratchet
lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) tools/pyright_check.py

clean:
	rm -rf _doc/_build _doc/_build_quick _doc/_backrefs _doc/auto_examples _doc/auto_recipes _doc/sg_execution_times.rst
	rm -rf .pytest_cache .ruff_cache build dist *.egg-info $(VENV_LATEST)
	find . -path ./$(VENV) -prune -o -path ./.git -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +
