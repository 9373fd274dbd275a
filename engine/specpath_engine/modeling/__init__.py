"""Model building blocks shared by the reference engine and method plugins' drafters.

RoPE (every scaling type, ``rope``), Hugging Face safetensors checkpoint I/O (``checkpoint``),
the one RMSNorm (``norm``), the draft decoder layer and its shape (``layers``), the request-row
allocator (``rows``), the kernel-or-reference choice (``dispatch``), ``torch_dtype`` (``dtypes``) and the embedded target's location
(``embedded``, torch-free) live here, in the core's public API, so a drafter is built without
importing the engine: plugins and the engine both depend on the core, never on each other.
"""
