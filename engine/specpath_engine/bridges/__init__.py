"""specpath methods inside other engines (vLLM, llama-cpp-python, transformers).

Each bridge is one module that imports its engine only when used, so ``import specpath`` (and
``import specpath_engine.bridges``) stays light. A bridge is an engine like any other: it resolves a
config with ``create_speculative_config``, reads the capability flags, builds the drafter with
``create_speculator`` and calls ``propose`` on the engine's own token histories. The core never
imports a bridge.

* :mod:`specpath_engine.bridges.vllm` - ``Proposer`` for vLLM's ``method="custom_class"`` door;
* :mod:`specpath_engine.bridges.llama_cpp` - ``DraftModel`` for ``Llama(draft_model=...)``;
* :mod:`specpath_engine.bridges.hf` - ``generate`` for ``model.generate(custom_generate=...)``.
"""
