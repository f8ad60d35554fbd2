"""Argus: agentic GPU-kernel optimization guided by data-flow invariants."""

__version__ = "0.1.0"
