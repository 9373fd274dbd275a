"""The one-line errors of ``specpath train``: the core CLI's :class:`~specpath.cli.CommandError`,
printed as ``specpath train: error: <message>`` (the file, flag or directory at fault, and what
to do about it)."""

from __future__ import annotations

from specpath.cli import CommandError

PROG = "specpath train"


def train_error(message: str) -> CommandError:
    return CommandError(" ".join(str(message).split()), prog=PROG)
