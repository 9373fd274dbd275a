"""specpath-drafting: what the built-in drafters that read the target's hidden states share.

Not a method (no entry point): a library the method plugins depend on beside the core.

- :mod:`.heads`: a head's ``config.json`` fields, the interface the drafting loop drives, head
  checkpoints; :mod:`.numerics`: fp8 weight emulation, vocabulary-sharded argmax.
- :mod:`.kv`: the drafter's own position-indexed KV; :mod:`.loop`: the shifted-input drafting
  loop (EAGLE-1/3, P-EAGLE, MTP); :mod:`.kernels` / :mod:`.reference`: its input preparation.
- :mod:`.config`: the config base of shifted-input drafters, auxiliary layers.
- :mod:`.block`: what DFlash and DSpark share (backbone, block loop, block queries, adaptive verification).
- :mod:`.training`: the recipes' command line, data, feature cache, rollout attention, train loop.
- :mod:`.testing`: tiny targets, random heads and engines for the plugins' tests.

The layers themselves (RMSNorm, the draft decoder layer, RoPE) are the core's
(:mod:`specpath_engine.modeling`), shared with the engine. Importing the package stays light (no torch).
"""
