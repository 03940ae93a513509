#!/usr/bin/env bash
# Build the C module (fsmcompile._native) with AddressSanitizer and UBSan into a
# separate tree and run the tests that drive the C code against it: an out-of-bounds
# read or write, a use after free or undefined behaviour fails the run at the line that
# did it, where the plain build might only compute a wrong mask or crash later.
#
#   bash scripts/sanitize.sh [pytest args...]     (make sanitize; after make setup)
#
# The source tree and its installed build are left alone: the Python sources are copied
# into $SANITIZE_DIR (default build/sanitize) beside the sanitized modules, and the tests
# import fsmcompile from there (the script checks that they do). Python itself is not
# sanitized, so the ASan runtime is preloaded, leak checks are off (the interpreter
# keeps memory to its exit by design) and PYTHONMALLOC=malloc makes every allocation,
# the C code's PyMem ones included, one that ASan watches.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
CC=${CC:-gcc}
work=${SANITIZE_DIR:-build/sanitize}
site="$work/site"
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"

rm -rf "$site" "$work/temp"
mkdir -p "$site"
# The Python sources (and package data) where the installed package puts them.
for pair in fsmcompile:fsmcompile runtime:fsmcompile/runtime cli:fsmcompile/cli \
    grammars:fsmcompile/grammars; do
  src=${pair%%:*}
  dst=${pair#*:}
  git ls-files -z -- "$src" | while IFS= read -r -d '' file; do
    mkdir -p "$site/$dst/$(dirname "${file#"$src"/}")"
    cp "$file" "$site/$dst/${file#"$src"/}"
  done
done
# The C module, sanitized, into the same tree (build_ext names it by package path).
CC="$CC" CFLAGS="$flags" LDFLAGS="$flags" "$PYTHON" -W ignore setup.py -q build_ext \
  --build-lib "$site" --build-temp "$work/temp" --force >"$work/build.log" 2>&1 \
  || { cat "$work/build.log" >&2; exit 1; }

asan=$("$CC" -print-file-name=libasan.so)
if [ ! -e "$asan" ]; then
  echo "sanitize: $CC has no libasan.so (install gcc's sanitizer runtime)" >&2
  exit 2
fi
export LD_PRELOAD="$asan"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export PYTHONMALLOC=malloc
export PYTHONPATH="$PWD/$site${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONSAFEPATH=1 # no current directory first on sys.path: its fsmcompile/ is unsanitized

"$PYTHON" - "$site" <<'EOF'
import os, sys
import fsmcompile._native as native
site = os.path.realpath(sys.argv[1])
if not os.path.realpath(native.__file__).startswith(site + os.sep):
    sys.exit(f"sanitize: imported {native.__file__}, not the sanitized build in {site}")
print(f"sanitize: testing the sanitized build in {site}")
EOF

# The runtime's C parser and bitmask writes, the artifact loader feeding them, and the
# tests that hold each compiler kernel to a plain reference, corpora left to `make test`
# (about 8 minutes on 2 busy cores; the build 1-2 more).
tests=(
  tests/runtime
  tests/unit/test_artifact.py
  tests/grammar/test_grammar_parser.py
  tests/grammar/test_lalr_native.py
  tests/grammar/test_lexcheck_native.py
  tests/grammar/test_lexer_native.py
  tests/grammar/test_exit_sets.py
  tests/grammar/test_lazy_grammar_index.py
  tests/unit/test_live_walk.py
  tests/unit/test_subset.py
  tests/unit/test_automaton.py
  tests/unit/test_automaton_kernels.py
  tests/unit/test_index.py
  tests/unit/test_native_stub.py
)
if [ -e tests/property/test_artifact_mutations.py ]; then
  tests+=(tests/property/test_artifact_mutations.py)
fi
# --capture=sys: a sanitizer's report goes to file descriptor 2 as the process dies; fd
# capture would hold it in a temporary file nobody prints.
"$PYTHON" -m pytest "${tests[@]}" -q -p no:cacheprovider -m "not slow and not gpu and not corpus" \
  --capture=sys "$@"
