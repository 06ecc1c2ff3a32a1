"""The tracedoc version, in a module that imports nothing (``tracedoc --version`` needs nothing else)."""

__version__ = "0.1.0"
