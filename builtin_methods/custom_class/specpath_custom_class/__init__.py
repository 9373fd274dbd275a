"""specpath-custom-class: method ``custom_class``, a proposer named by import path.

The class may follow specpath's :class:`~specpath.speculator.BaseSpeculator` contract or
vLLM's ``custom_class`` contract (``Class(config)``, ``load_model(...)``, ``propose(...) ->
list[list[int]]``); :mod:`specpath_custom_class.vllm_adapter` runs the latter unchanged.
Code named this way runs only with ``trust_remote_code=True``.
"""
