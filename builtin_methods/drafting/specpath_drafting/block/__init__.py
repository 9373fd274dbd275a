"""Block drafting (DFlash, DSpark): a small drafter reads the target's fused taps as KV-injected
context and drafts a whole block in one non-causal pass.

:mod:`.config` (the rules both methods share), :mod:`.drafter` (the backbone and its
checkpoints), :mod:`.speculator` (context KV and the block pass), :mod:`.kernels` /
:mod:`.reference` (block queries), :mod:`.adaptive` (verify-length scheduling), :mod:`.training`
(block batches, the loss, the recipes' shared steps), :mod:`.testing` (tiny drafters).
"""
