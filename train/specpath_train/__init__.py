"""specpath's training toolkit: drafters trained for a target on the text it generates itself.

Each method's recipe lives in :mod:`specpath_train.recipes`; the shared pieces beside it
(the data pipeline and train loop of the hidden-state heads, the target's own text for BPE
targets, the block drafters' batches). Nothing at run time imports this distribution.
"""
