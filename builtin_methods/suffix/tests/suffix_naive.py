"""A naive restatement of suffix decoding, to test the compiled trees against.

Counts are recomputed from the raw sequences every time: ``count(s)`` is the number of
positions of the tree's sequences where ``s`` starts (``|s| <= depth``). Everything else
(best child: most frequent, ties to the smaller token; the per-match-length budget; the
probability threshold; request tree against global tree) follows the same rules as
``specpath_suffix``, written the slow, obvious way.
"""

from __future__ import annotations

from collections import OrderedDict


def count(sequences, s):
    n = len(s)
    return sum(1 for seq in sequences for i in range(len(seq) - n + 1) if tuple(seq[i:i + n]) == s)


def all_counts(sequences, depth):
    """{substring: count} for every substring of length 1..depth (the trie's nodes)."""
    out = {}
    for seq in sequences:
        for i in range(len(seq)):
            for n in range(1, min(depth, len(seq) - i) + 1):
                key = tuple(seq[i:i + n])
                out[key] = out.get(key, 0) + 1
    return out


def children(counts, s, depth):
    if len(s) >= depth:
        return []
    return [(c, key[-1]) for key, c in counts.items() if len(key) == len(s) + 1 and key[:-1] == s]


def path_draft(counts, context, depth, k, factor, min_prob):
    """(tokens, score) for one tree."""
    best, best_score = [], 0.0
    for m in range(1, min(len(context), depth) + 1):
        pattern = tuple(context[-m:])
        if counts.get(pattern, 0) == 0:
            break
        budget = min(k, int(factor * m))
        node, prob, draft, score = pattern, 1.0, [], 0.0
        while len(draft) < budget:
            options = children(counts, node, depth)
            if not options:
                break
            c, token = max(options, key=lambda o: (o[0], -o[1]))
            prob *= c / counts[node]
            if prob < min_prob:
                break
            draft.append(token)
            score += prob
            node = node + (token,)
        if score >= best_score and (draft or not best):
            best, best_score = draft, score
    return best, best_score


def tree_score(counts, context, depth, k, factor, min_prob):
    """The score of the best-first tree draft (the greedy best-first tree maximises the sum
    of probabilities for a node budget, since a child is never more probable than its parent)."""
    best = 0.0
    for m in range(1, min(len(context), depth) + 1):
        pattern = tuple(context[-m:])
        if counts.get(pattern, 0) == 0:
            break
        budget = min(k, int(factor * m))
        frontier = [(c / counts[pattern], pattern + (t,)) for c, t in children(counts, pattern, depth)]
        frontier = [x for x in frontier if x[0] >= min_prob]
        score, taken = 0.0, 0
        while taken < budget and frontier:
            frontier.sort(key=lambda x: (-x[0], x[1][-1]))
            prob, node = frontier.pop(0)
            score += prob
            taken += 1
            for c, t in children(counts, node, depth):
                p = prob * c / counts[node]
                if p >= min_prob:
                    frontier.append((p, node + (t,)))
        best = max(best, score)
    return best


class NaiveSuffixCache:
    def __init__(self, depth, max_cached, factor, min_prob):
        self.depth, self.max_cached, self.factor, self.min_prob = depth, max_cached, factor, min_prob
        self.live: dict[str, list[int]] = {}
        self.starts: dict[str, int] = {}
        self.responses: OrderedDict[str, tuple[int, list[int]]] = OrderedDict()

    def append(self, req_id, tokens):
        if req_id not in self.live:
            self.live[req_id] = []
            if req_id in self.responses:
                self.starts[req_id] = self.responses[req_id][0]
        self.live[req_id] += list(tokens)

    def truncate(self, req_id, length):
        del self.live[req_id][length:]
        if self.starts.get(req_id, -1) > length:
            self.starts[req_id] = length

    def global_sequences(self):
        return [r for _, r in self.responses.values()] if self.max_cached != 0 else []

    def draft(self, req_id, k):
        seq = self.live[req_id]
        self.starts.setdefault(req_id, len(seq))
        k = min(k, self.depth)
        local = path_draft(all_counts([seq], self.depth), seq, self.depth, k, self.factor, self.min_prob)
        if self.max_cached != 0:
            glob = path_draft(all_counts(self.global_sequences(), self.depth), seq, self.depth, k,
                              self.factor, self.min_prob)
            if glob[1] > local[1]:
                return glob[0]
        return local[0]

    def tree_score(self, req_id, k):
        seq = self.live[req_id]
        scores = [tree_score(all_counts([seq], self.depth), seq, self.depth, k, self.factor, self.min_prob)]
        if self.max_cached != 0:
            scores.append(tree_score(all_counts(self.global_sequences(), self.depth), seq, self.depth, k,
                                     self.factor, self.min_prob))
        return max(scores)

    def stop(self, req_id):
        seq = self.live.pop(req_id, None)
        if seq is None:
            return
        start = self.starts.pop(req_id, -1)
        if self.max_cached == 0:
            return
        self.responses.pop(req_id, None)
        if 0 <= start < len(seq):
            self.responses[req_id] = (start, seq[start:])
            while self.max_cached > 0 and len(self.responses) > self.max_cached:
                self.responses.popitem(last=False)
