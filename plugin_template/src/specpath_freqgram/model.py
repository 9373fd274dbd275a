"""The drafter's model: next-token frequencies learned online from one request's own text.

For every context of 1..``max_order`` tokens that has occurred in the request so far, the
model counts which token followed it. A proposal is a greedy chain: look up the longest
context that ends the sequence, take its most frequent follower (the most recent one on a
tie), append it, repeat. Repetitive text (code, tables, lists, templated answers) makes long
chains that the target accepts; novel text makes short or empty ones, which cost nothing to
verify.

Pure Python, no torch: one update is ``max_order`` dictionary operations per new token and
a proposal is at most ``max_order * k`` look-ups, so the model keeps up with any engine step.
"""

from __future__ import annotations

from collections.abc import Sequence


class FrequencyModel:
    """Online counts of ``context -> next token`` for one request."""

    __slots__ = ("max_order", "_tokens", "_counts", "_best")

    def __init__(self, max_order: int) -> None:
        if max_order < 1:
            raise ValueError(f"max_order must be >= 1, got {max_order}")
        self.max_order = max_order
        self.reset()

    def reset(self) -> None:
        """Forget everything learned."""
        self._tokens: list[int] = []
        self._counts: dict[tuple[int, ...], dict[int, int]] = {}
        # Per context, the current most frequent follower and its count, kept up to date on
        # every update so that proposing never scans a count table.
        self._best: dict[tuple[int, ...], tuple[int, int]] = {}

    def __len__(self) -> int:
        """How many tokens of the request the model has learned from."""
        return len(self._tokens)

    def sync(self, token_ids: Sequence[int]) -> None:
        """Learn from the tokens of ``token_ids`` not seen yet.

        ``token_ids`` is the request's whole sequence; it only grows between steps (rejected
        drafts never enter it). If it ever got shorter (the engine recomputed the request),
        the model starts over rather than keep counts of text that no longer exists.
        """
        if len(token_ids) < len(self._tokens):
            self.reset()
        for token in token_ids[len(self._tokens):]:
            self._add(int(token))

    def _add(self, token: int) -> None:
        tokens = self._tokens
        end = len(tokens)
        for order in range(1, min(self.max_order, end) + 1):
            context = tuple(tokens[end - order:])
            followers = self._counts.setdefault(context, {})
            count = followers.get(token, 0) + 1
            followers[token] = count
            if count >= self._best.get(context, (token, 0))[1]:
                self._best[context] = (token, count)
        tokens.append(token)

    def next_token(self, history: Sequence[int]) -> int | None:
        """The most frequent follower of the longest known context ending ``history``."""
        for order in range(min(self.max_order, len(history)), 0, -1):
            best = self._best.get(tuple(history[len(history) - order:]))
            if best is not None:
                return best[0]
        return None

    def propose(self, k: int) -> list[int]:
        """A greedy chain of up to ``k`` tokens continuing the learned sequence."""
        history = self._tokens[-self.max_order:] if self._tokens else []
        chain: list[int] = []
        for _ in range(k):
            token = self.next_token(history)
            if token is None:
                break
            chain.append(token)
            history = (history + [token])[-self.max_order:]
        return chain
