"""specpath-eagle: EAGLE drafting for specpath (methods ``eagle`` and ``extract_hidden_states``).

The EAGLE-1 head (:mod:`.head`), its speculators (:mod:`.speculator`), config classes
(:mod:`.config`); the drafting loop, KV and kernel it runs on are the shared library's
(``specpath_drafting``), its training recipe is ``specpath_train.recipes.eagle``.

Importing the package stays light (no torch): everything heavy is in submodules.
"""
