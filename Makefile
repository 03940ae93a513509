# Two entry points that do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
TOKENIZER ?= tests/data/gpt2/tokenizer.json.gz
# The venv the end-to-end tests in real vLLM run in (built by scripts/vllm_env.sh).
VLLM_VENV ?= .venv-vllm

.PHONY: setup demo wheel test test-vllm sanitize lint bench

setup:
	bash scripts/setup.sh

demo: setup
	fsmcompile grammars/examples/person.json --tokenizer $(TOKENIZER) -o person.fsm
	fsmcompile inspect person.fsm
	fsmcompile check person.fsm '{"name":"Ada","age":36}' --tokenizer $(TOKENIZER)

# The sdist and the wheel, repaired to a manylinux tag and checked, into dist/.
wheel: setup
	PYTHON=$(PYTHON) bash scripts/wheel.sh

# The suite once, as a user gets the package: the repaired wheel installed into a fresh
# venv with no C compiler, the tests importing it from there (scripts/test_wheel.sh).
# For the editable install of `make setup`, run pytest directly.
test: wheel
	PYTHON=$(PYTHON) bash scripts/test_wheel.sh -m "not gpu and not vllm" -q

# End-to-end in real vLLM (CPU build): offline engine and OpenAI server, a few minutes.
test-vllm:
	bash scripts/vllm_env.sh $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pytest tests/vllm -m vllm -q -p no:cacheprovider

# The C modules built with AddressSanitizer and UBSan, and the tests that drive them
# (scripts/sanitize.sh; needs `make setup` first).
sanitize:
	PYTHON=$(PYTHON) bash scripts/sanitize.sh

lint:
	ruff check . && ruff format --check . && mypy
	$(PYTHON) scripts/lint_imports.py

bench: setup
	$(PYTHON) -m bench --quick
