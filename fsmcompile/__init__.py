"""fsmcompile: regex, JSON Schema and Lark grammars → token-level FSM indexes.

The flow: spec → byte DFA → token index → artifact → store → runtime mask. This module
exports the nouns of each stage; the runtime lives in `fsmcompile.runtime` (needs torch).
"""

from fsmcompile.artifact import load, save
from fsmcompile.compiler import (
    Compiler,
    CompileResult,
    Index,
    compile_json_schema,
    compile_lark,
    compile_regex,
    compile_spec,
)
from fsmcompile.errors import (
    ArtifactCorruptError,
    ArtifactError,
    ArtifactVersionError,
    BudgetExceededError,
    FsmcompileError,
    GrammarError,
    RegexSyntaxError,
    SchemaError,
    SpecError,
    StoreError,
    StoreUnavailableError,
    UnsupportedFeatureError,
    VocabularyError,
    VocabularyMismatchError,
)
from fsmcompile.tables.token_index import TokenIndex
from fsmcompile.version import __version__
from fsmcompile.vocabulary import Vocabulary

__all__ = [
    "ArtifactCorruptError",
    "ArtifactError",
    "ArtifactVersionError",
    "BudgetExceededError",
    "CompileResult",
    "Compiler",
    "FsmcompileError",
    "GrammarError",
    "Index",
    "RegexSyntaxError",
    "SchemaError",
    "SpecError",
    "StoreError",
    "StoreUnavailableError",
    "TokenIndex",
    "UnsupportedFeatureError",
    "Vocabulary",
    "VocabularyError",
    "VocabularyMismatchError",
    "__version__",
    "compile_json_schema",
    "compile_lark",
    "compile_regex",
    "compile_spec",
    "load",
    "save",
]
