# The two commands of the README. Both create .venv on first use.
#   make reproduce   run the whole DAG on the embedded default profile (CPU, no network)
#   make test        run the test suite
#   make test-fast   the tests not marked slow (no Snakemake DAG, no multi-process launch): the edit loop
# GPU users: make reproduce TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
PYTHON     ?= python3
VENV       ?= .venv
TORCH_SPEC ?= torch==2.13.0
# the versions installed, exported from the tested environment (`make constraints`); CONSTRAINTS= installs
# without pins (the newest versions the floors in pyproject.toml admit)
CONSTRAINTS ?= constraints.txt
# a scratch venv with every declared dependency at its floor (`make floors`)
FLOORS_VENV ?= build/floors-venv
CORES      ?= 2
PROFILE    ?= config/default.yaml
# where the jobs run: local (this machine's CORES), gpu (this machine's GPUs) or slurm (workflows/profiles/;
# the gpu and slurm profiles size their own jobs); SNAKEFLAGS: more snakemake options
EXECUTOR   ?= local
SNAKEFLAGS ?=
ifneq ($(filter reproduce,$(MAKECMDGOALS)),)
ifeq ($(wildcard workflows/profiles/$(EXECUTOR)/config.yaml),)
$(error EXECUTOR=$(EXECUTOR): no workflows/profiles/$(EXECUTOR)/; use local, gpu or slurm)
endif
endif
BIN        := $(VENV)/bin
STAMP      := $(VENV)/.installed

export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

SMOKE      ?= $(wildcard config/paper-*.yaml) config/small.yaml $(wildcard config/examples/*.yaml)

.PHONY: reproduce test test-fast smoke gpu-check bench host-trace bench-gpu lint verify-local clean findings constraints floors

$(STAMP): pyproject.toml $(CONSTRAINTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(TORCH_SPEC)
	$(BIN)/python -m pip install --quiet $(if $(CONSTRAINTS),-c $(CONSTRAINTS)) -e ".[test]"
	touch $(STAMP)

# constraints.txt from the venv as it is (after `make test` passed in it): every installed distribution but
# this package, torch without its local build tag (so a CUDA build of the same version satisfies it).
# To move to newer versions: rm -r .venv && make test CONSTRAINTS= && make constraints
constraints:
	test -x $(BIN)/python
	{ echo "# pip freeze of the tested environment (make constraints); make installs with -c constraints.txt"; \
	  $(BIN)/python -m pip freeze --exclude-editable | grep -v '^#' | sed -E 's/^(torch==[^+]+)\+.*/\1/'; } > constraints.txt.tmp
	mv constraints.txt.tmp constraints.txt
	touch $(STAMP)

# every dependency of pyproject.toml ([project] and the test extra) pinned to its floor (">=X" -> "==X") in
# a scratch venv, then the test suite in it: the check behind the floors
floors:
	test -x $(FLOORS_VENV)/bin/python || $(PYTHON) -m venv $(FLOORS_VENV)
	$(FLOORS_VENV)/bin/python -m pip install --quiet $(TORCH_SPEC)
	$(FLOORS_VENV)/bin/python -c 'import re, sys; text = open("pyproject.toml").read(); \
	  project = text[text.index("[project]"):text.index("[tool.")]; \
	  print("\n".join(f"{n}=={v}" for n, v in re.findall(r"\"([A-Za-z0-9._-]+)(?:\[[^]]*\])?>=([^\",;]+)\"", project)))' \
	  > $(FLOORS_VENV)/floors.txt
	$(FLOORS_VENV)/bin/python -m pip install --quiet -c $(FLOORS_VENV)/floors.txt -e ".[test]"
	$(FLOORS_VENV)/bin/python -m pip check
	$(FLOORS_VENV)/bin/python -m pytest -q -n $(CORES) --dist loadscope --no-loadscope-reorder

reproduce: $(STAMP)
	$(BIN)/python -m workflows.experiments $(PROFILE)
	$(BIN)/snakemake --profile workflows/profiles/$(EXECUTOR) $(if $(filter local,$(EXECUTOR)),--cores $(CORES)) \
	  --configfile $(PROFILE) $(SNAKEFLAGS)

# the tests in CORES worker processes (pytest-xdist), a module's tests on one worker (its fixtures built once);
# the report's browser test needs Debian's chromium: installed when missing and apt-get can (root), else that
# test is skipped (never under CI=true, where it fails instead)
test: $(STAMP)
	command -v chromium >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq --no-install-recommends chromium >/dev/null; } 2>/dev/null || \
	  echo "chromium is not installed (apt-get install chromium): the report's browser test is skipped"
	$(BIN)/python -m pytest -q -n $(CORES) --dist loadscope --no-loadscope-reorder

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n $(CORES) --dist loadscope --no-loadscope-reorder -m "not slow"

# every full-scale profile's whole DAG in smoke mode (workflows/smoke.py: shapes, steps and data shrunk, hub
# models, corpora and tasks stood in for locally), tables checked; results/<profile>-smoke/, resumable
smoke: $(STAMP)
	$(BIN)/python -m workflows.smoke $(SMOKE) --run --cores $(CORES) --summary results/smoke/summary.json

bench: $(STAMP)
	$(BIN)/python -m benchmarks.train_throughput
	$(BIN)/python -m benchmarks.concept_step_time
	$(BIN)/python -m benchmarks.lmeval_throughput
	$(BIN)/python -m benchmarks.ncm_sampling
	$(BIN)/python -m benchmarks.dlcm_attention
	$(BIN)/python -m benchmarks.compile_threshold

# this host's per-operation trace of one training step of each embedded model, compared with the AMD EPYC
# reference the repository ships (benchmarks/reference/): names the first operation whose output differs
host-trace: $(STAMP)
	$(BIN)/python -m benchmarks.host_trace --against --out results/benchmarks/host_trace.json

# on a GPU machine (install a CUDA torch: TORCH_SPEC): config/small.yaml's smoke mode on the GPU (one run per
# model family, every evaluation kind) and bench-gpu, figures in results/benchmarks/gpu_check.json
gpu-check: $(STAMP)
	$(BIN)/python -m benchmarks.gpu_check

# on a GPU machine (install a CUDA torch: TORCH_SPEC): GPT-2 124M Base / PM / ConceptLM against HF, compiled, bf16
bench-gpu: $(STAMP)
	$(BIN)/python -m benchmarks.gpu_throughput

# lm-eval on the papers' real tasks that have local copies (LOCAL_DATA; by default the development machine's
# copies, docs/sources.md, "Local copies of real data"), for one trained run of any profile
# (RUN_DIR=results/<profile>/runs/<experiment>/seed<k>; its tokenizer is found beside it); LIMIT=N: N documents
# per task. Skipped when the default manifest's folder is absent; a manifest you name must load.
RUN_DIR ?= results/runs/base_gpt2_s/seed0
DEFAULT_LOCAL_DATA := evals/tasks/local_data.yaml
LOCAL_DATA ?= $(DEFAULT_LOCAL_DATA)
verify-local: $(STAMP)
	$(BIN)/python -m workflows.cli lm-eval --run-dir $(RUN_DIR) --tasks conceptlm_zeroshot,conceptlm_ppl,dlcm_zeroshot \
	  --local-only --local-data $(LOCAL_DATA) $(if $(filter $(DEFAULT_LOCAL_DATA),$(LOCAL_DATA)),--skip-missing-root) \
	  $(if $(LIMIT),--limit $(LIMIT)) --out $(RUN_DIR)/eval/local.json

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m workflows.experiments $(PROFILE)
	@# every lint but one: the rules declare no conda environment or container (they run this venv)
	$(BIN)/snakemake --lint --configfile $(PROFILE) 2>&1 | $(BIN)/python -c 'import re, sys; out = sys.stdin.read(); \
	  left = set(re.findall(r"^ +\* (.+?):$$", out, re.M)) - {"Specify a conda environment or container for each rule."}; \
	  bad = bool(left) or not ("Lints for" in out or "Congratulations" in out); \
	  print(out if bad else "lint: no lint but the accepted one (no conda environment or container)"); sys.exit(bad)'
	$(BIN)/snakemake -n --configfile $(PROFILE)

# the findings generated from results/tables (after make reproduce), printed and written into docs/findings.md;
# then the numbers the docs' prose quotes (docs/quotes.yaml) checked against the same tables
findings: $(STAMP)
	$(BIN)/python -m reports findings --tables results/tables --readme docs/findings.md
	$(BIN)/python -m reports quotes --tables results/tables

clean:
	rm -rf results .snakemake .stamps
