"""specpath-ngram: prompt-lookup (n-gram) drafting for specpath, methods ``ngram`` and
``ngram_gpu``.

Importing this package stays light (no torch, numba or triton): the compiled proposers live
in :mod:`specpath_ngram.batch` and :mod:`specpath_ngram.kernels`, loaded by the speculator.
"""

from specpath_ngram.matching import propose_ngram_tokens

__all__ = ["propose_ngram_tokens"]
