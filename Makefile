# Two entry points that do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
TOKENIZER ?= tests/data/gpt2/tokenizer.json.gz

.PHONY: setup demo test lint bench

setup:
	bash scripts/setup.sh

demo: setup
	fsmcompile grammars/examples/person.json --tokenizer $(TOKENIZER) -o person.fsm
	fsmcompile inspect person.fsm
	fsmcompile check person.fsm '{"name":"Ada","age":36}' --tokenizer $(TOKENIZER)

test: setup
	$(PYTHON) -m pytest -m "not gpu" -q

lint:
	ruff check . && ruff format --check . && mypy

bench: setup
	$(PYTHON) -m bench --quick
