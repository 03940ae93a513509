"""Vocabularies: token id → bytes for real tokenizers, plus the byte trie the index walks."""

from fsmcompile.vocabulary.vocabulary import Vocabulary

__all__ = ["Vocabulary"]
