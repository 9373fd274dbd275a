"""Model building blocks shared by the reference engine and method plugins' drafters.

RoPE (every scaling type) and Hugging Face safetensors checkpoint I/O live here, in the core's
public API, so a drafter can build its head without importing the engine: plugins and the
engine both depend on the core, never on each other.
"""
