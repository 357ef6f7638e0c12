# The two commands of the README. Both create .venv on first use.
#   make reproduce   run the whole DAG on the embedded default profile (CPU, no network)
#   make test        run the test suite
# GPU users: make reproduce TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
PYTHON     ?= python3
VENV       ?= .venv
TORCH_SPEC ?= torch==2.13.0
CORES      ?= 2
PROFILE    ?= config/default.yaml
BIN        := $(VENV)/bin
STAMP      := $(VENV)/.installed

export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: reproduce test bench bench-gpu lint verify-local clean findings

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(TORCH_SPEC)
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

reproduce: $(STAMP)
	$(BIN)/python -m workflows.experiments $(PROFILE)
	$(BIN)/snakemake --profile workflows/profiles/local --cores $(CORES) --configfile $(PROFILE)

# the tests in CORES worker processes (pytest-xdist), a module's tests on one worker (its fixtures built once)
test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(CORES) --dist loadscope

bench: $(STAMP)
	$(BIN)/python -m benchmarks.train_throughput
	$(BIN)/python -m benchmarks.concept_step_time
	$(BIN)/python -m benchmarks.lmeval_throughput
	$(BIN)/python -m benchmarks.ncm_sampling
	$(BIN)/python -m benchmarks.dlcm_attention

# on a GPU machine (install a CUDA torch: TORCH_SPEC): GPT-2 124M Base / PM / ConceptLM against HF, compiled, bf16
bench-gpu: $(STAMP)
	$(BIN)/python -m benchmarks.gpu_throughput

# lm-eval on local copies of real tasks (../shared/data); needs a trained run from `make reproduce`
RUN_DIR ?= results/runs/base_gpt2_s/seed0
verify-local: $(STAMP)
	$(BIN)/python -m evals.harness --run-dir $(RUN_DIR) --tokenizer results/data/world/tokenizer.json \
	  --tasks local_zeroshot --local-data evals/tasks/local_data.yaml --skip-missing-root \
	  --out $(RUN_DIR)/eval/zeroshot_local.json

lint: $(STAMP)
	$(BIN)/python -m workflows.experiments $(PROFILE)
	$(BIN)/snakemake --lint --configfile $(PROFILE)
	$(BIN)/snakemake -n --configfile $(PROFILE)

# the findings generated from results/tables (after make reproduce), printed and written into README.md
findings: $(STAMP)
	$(BIN)/python -m reports findings --tables results/tables --readme README.md

clean:
	rm -rf results .snakemake
