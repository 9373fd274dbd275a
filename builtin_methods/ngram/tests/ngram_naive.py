"""A quadratic restatement of the matching rule, written for clarity, not speed."""


def naive_propose(tokens, min_n, max_n, k, max_model_len=None):
    tokens = list(tokens)
    total = len(tokens)
    if max_model_len is not None:
        k = min(k, max_model_len - total)
    if k <= 0:
        return []
    for n in range(min(max_n, total - 1), min_n - 1, -1):
        suffix = tokens[total - n :]
        # An occurrence must end before the last token so that something follows it.
        for start in range(total - n):
            if tokens[start : start + n] == suffix:
                return tokens[start + n : start + n + k]
    return []
