"""Block drafting (DFlash, DSpark): a small drafter reads the target's fused taps as KV-injected
context and drafts a whole block in one non-causal pass. Only what both methods use lives here;
each method's choice of drafts, config row and hooks are its plugin's (``specpath_dflash``,
``specpath_dspark``).

:mod:`.config` (the rules both methods share), :mod:`.published` (the published ``config.json``
formats), :mod:`.drafter` (the backbone and its checkpoints), :mod:`.speculator` (context KV and
the block pass), :mod:`.kernels` / :mod:`.reference` (block queries), :mod:`.adaptive`
(verify-length scheduling), :mod:`.testing` (tiny drafters).
"""
