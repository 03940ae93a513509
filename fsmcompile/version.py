"""Version numbers: the package's, and the artifact format's (part of every cache key)."""

__version__ = "0.1.0"

FORMAT_VERSION = 3
"""Bump when the artifact layout or the meaning of a mask changes; old entries then miss."""
