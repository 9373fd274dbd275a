"""specpath-eagle: EAGLE drafting for specpath (methods ``eagle`` and ``extract_hidden_states``)
and the hidden-state drafter machinery EAGLE-3 and MTP reuse: heads (:mod:`.head`,
:mod:`.layers`), the drafter's own KV (:mod:`.kv`), the input-preparation kernel
(:mod:`.kernels`, :mod:`.reference`), the drafting loop (:mod:`.speculator`) and the training
recipes (:mod:`.training`).

Importing the package stays light (no torch): everything heavy is in submodules.
"""
