"""The package version, in a module of its own so the core can read it without
importing the ``opgate`` package it belongs to (``_catalog`` binds it into the
definitions revision)."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
