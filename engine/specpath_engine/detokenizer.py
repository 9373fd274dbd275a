"""Incremental detokenization for streaming: text as tokens arrive, never half a character.

A byte-level BPE piece (or a byte-tokenizer id) can end inside a UTF-8 sequence, and a
SentencePiece-style decoder drops a leading space when a piece is decoded alone, so decoding
each new chunk of ids on its own gives wrong text. :class:`IncrementalDetokenizer` decodes a
short window that starts a few tokens back (the "prefix", already emitted) and emits what the
window adds beyond the prefix's text, holding back while the window's text ends in U+FFFD (an
incomplete character). :meth:`~IncrementalDetokenizer.finish` flushes what is held back, so
the concatenated chunks equal ``tokenizer.decode`` of all ids for any tokenizer whose decode is
a concatenation over character boundaries (byte-level BPE, the byte tokenizer).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

REPLACEMENT = "\ufffd"


class IncrementalDetokenizer:
    """Turns a growing list of token ids into text chunks (see the module docstring)."""

    def __init__(self, tokenizer: Any, *, stop: Sequence[str] = ()) -> None:
        self._tok = tokenizer
        self._ids: list[int] = []
        self._prefix_offset = 0  # window start: ids already emitted, decoded again for context
        self._read_offset = 0  # ids[:read_offset] are emitted as text
        self._stop = tuple(stop)
        self._text = ""  # all stable text so far (stop strings not yet cut)
        self._emitted = 0  # characters of _text already handed out
        self._stopped = False

    @property
    def token_ids(self) -> list[int]:
        return list(self._ids)

    def add(self, token_ids: Iterable[int]) -> str:
        """Take new ids; return the text they complete (may be empty: held back)."""
        self._ids.extend(int(t) for t in token_ids)
        prefix = self._tok.decode(self._ids[self._prefix_offset:self._read_offset])
        window = self._tok.decode(self._ids[self._prefix_offset:])
        if len(window) > len(prefix) and not window.endswith(REPLACEMENT) and window.startswith(prefix):
            self._text += window[len(prefix):]
            self._prefix_offset, self._read_offset = self._read_offset, len(self._ids)
        return self._release(final=False)

    def finish(self, full_text: str | None = None) -> str:
        """The rest of the text: what was held back. ``full_text`` (the request's final text,
        stop strings cut) wins where given, so the chunks always add up to it."""
        if full_text is None:
            tail = self._tok.decode(self._ids[self._prefix_offset:])
            prefix = self._tok.decode(self._ids[self._prefix_offset:self._read_offset])
            self._text += tail[len(prefix):] if tail.startswith(prefix) else tail
            return self._release(final=True)
        done = self._text[:self._emitted]
        rest = full_text[len(done):] if full_text.startswith(done) else ""
        self._emitted = len(self._text)
        self._stopped = True
        return rest

    def _release(self, *, final: bool) -> str:
        """Stable text not yet emitted, cut at a stop string; unless ``final``, hold back a tail
        that could still grow into a stop string."""
        if self._stopped:
            return ""
        end = len(self._text)
        for s in self._stop:
            cut = self._text.find(s)
            if cut >= 0:
                end = min(end, cut)
                self._stopped = True
        if not self._stopped and not final:
            for s in self._stop:
                for n in range(min(len(s) - 1, end), 0, -1):
                    if self._text.endswith(s[:n], 0, end):
                        end = min(end, len(self._text) - n)
                        break
        end = max(end, self._emitted)
        out = self._text[self._emitted:end]
        self._emitted = end
        return out
