"""Tahrix Lab: an LLM assistant for on-chain investigations in notebooks."""

__version__ = "0.1.0"
