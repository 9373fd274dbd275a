"""specpath-suffix: suffix decoding for specpath (method ``suffix``).

Per-request suffix trees over each request's prompt and output, plus one global tree over
finished responses; drafts follow the most frequent continuation of the longest useful match
(Oliaro et al., arXiv 2411.04975). Importing this package stays light (no numba): the
compiled trees live in :mod:`specpath_suffix.forest`, loaded by the speculator.
"""
