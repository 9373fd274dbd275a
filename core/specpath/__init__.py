"""specpath: turn a speculative-decoding ``method`` into an execution path."""

__version__ = "0.1.0"
