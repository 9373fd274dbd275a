"""specpath-freqgram: a speculative-decoding method plugin for specpath.

The ``freqgram`` drafter learns, per request, which token follows each short context in the
text generated so far and proposes the most frequent continuation. Importing this package
imports nothing heavy; torch is imported only by :mod:`specpath_freqgram.speculator`.
"""

__version__ = "0.1.0"
