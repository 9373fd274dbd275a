"""specpath-eagle: EAGLE drafting for specpath (methods ``eagle`` and ``extract_hidden_states``).

The EAGLE-1 head (:mod:`.head`), its speculators (:mod:`.speculator`), config classes
(:mod:`.config`) and training recipe (:mod:`.train_eagle`); the drafting loop, KV, kernel and
training toolkit it runs on are the shared library's (``specpath_drafting``).

Importing the package stays light (no torch): everything heavy is in submodules.
"""
