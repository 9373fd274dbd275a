"""The reference engine: a Llama-family model, paged KV, scheduler, runner and the ``LLM`` API.

It reads the resolved configuration through the core's public API only, so it could become a
distribution of its own without edits. Import the pieces from their modules
(``specpath_engine.llm``, ``specpath_engine.model``, ...); this package imports nothing heavy.
"""

from specpath_engine.threads import prefer_passive_wait as _prefer_passive_wait

_prefer_passive_wait()  # before anything here loads torch: libgomp reads its wait policy once
