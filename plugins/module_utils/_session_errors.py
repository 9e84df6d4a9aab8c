# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Errors of the session stores. Private helper of the inferops.vllm_dr collection."""

from __future__ import annotations

# Where a server or a client library starts repeating the request it refused. Redis answers an
# unknown (or renamed) command with its first arguments, and redis-py puts the whole command in
# front of a pipeline's error: with a script's arguments, that is a session's refresh token.
_ECHO_AFTER = (', with args beginning with:', ' with args beginning with:')
_ECHO_BEFORE = ' of pipeline caused error: '

MESSAGE_LIMIT = 200


class StoreError(Exception):
    """A session store problem; the message is one line naming the problem and the fix, never a token.

    ``refused`` is true when the server answered the failed request with an error, so that
    request changed nothing (false: no answer came, its outcome is unknown).
    """

    def __init__(self, message: str, refused: bool = False):
        super().__init__(message)
        self.refused = refused


def server_words(text: str) -> str:
    """A server's error text fit for a message: its first line, without any echo of the request's arguments."""
    text = str(text).strip()
    text = text.splitlines()[0] if text else ''
    if _ECHO_BEFORE in text:
        text = text.rpartition(_ECHO_BEFORE)[2]
    for marker in _ECHO_AFTER:
        if marker in text:
            text = text.split(marker, 1)[0]
    return text.strip()[:MESSAGE_LIMIT]


def exception_chain(exc: BaseException):
    """``exc`` and the exceptions it was raised from or while handling, outermost first."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__
