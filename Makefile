# Two entry points (see README): `make demo` and `make test`. Both set up .venv first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.precdx-installed

.PHONY: setup demo test audit bench clean

# Byte-compile the checkout's package: an editable install writes no .pyc, and where
# PYTHONDONTWRITEBYTECODE is set the interpreter never writes them either, so every `precdx`
# call would compile ~190 modules from source (0.3 s). compileall writes them regardless of that
# variable and skips the files whose .pyc is up to date. (A wheel install gets them from pip.)
# The block reader's C kernels (logs/scan.c) are built once per version of their source (a no-op
# when built; without a C compiler the tool says so and numpy does the same work).
setup: $(STAMP)
	$(BIN)/python -m compileall -q engine
	$(BIN)/python tools/build_native.py --quiet

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# CPU build of torch (a bare `torch` requirement would pull a multi-GB CUDA build)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[serve,test,tracking,wandb,zstd,mcp]'
	touch $(STAMP)

demo: setup
	$(BIN)/precdx demo

# The suite runs on two pytest-xdist workers. worksteal hands each worker half of the tests in
# collection order (a module's tests stay together, so module-scoped fixtures are built once)
# and lets an idle worker take the other's remaining tests. `pytest` alone still runs it on one.
test: setup
	$(BIN)/python -m pytest -n 2 --dist worksteal
	$(BIN)/precdx rules lint
	$(BIN)/precdx audit --fail-under 100

bench: setup
	for b in bench/*; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) build dist *.egg-info precdx-demo
