"""What a new password must be: 12-256 characters, not a common or breached one, not easy to guess.

The lists come packaged with zxcvbn (its `passwords` list: the 30,000 most frequent passwords of public
breach corpora; plus English words, names and keyboard patterns in its estimator). Nothing is looked up
over the network. zxcvbn's estimate must reach score 3 (about 10^8 guesses: no repeats like 'aaaa…',
sequences like '1234…', keyboard walks or a common password with digits appended).
"""

from __future__ import annotations

from functools import lru_cache

from zxcvbn import zxcvbn
from zxcvbn.frequency_lists import FREQUENCY_LISTS

MIN_LENGTH = 12
MAX_LENGTH = 256
MIN_SCORE = 3
# zxcvbn's matching is superlinear in the length; it judges the first characters (a longer password is at
# least as strong as its prefix).
ESTIMATE_CHARS = 72
# Words about this appliance an attacker tries first.
CONTEXT_WORDS = ("perigee", "admin", "gateway", "satellite", "operator", "viewer")


@lru_cache(maxsize=1)
def _common() -> frozenset[str]:
    return frozenset(FREQUENCY_LISTS["passwords"])


def problem(password: str, username: str) -> str | None:
    """None when `password` is acceptable for `username`, else why not (one sentence for the user)."""
    if len(password) < MIN_LENGTH:
        return f"password must be at least {MIN_LENGTH} characters"
    if len(password) > MAX_LENGTH:
        return f"password must be at most {MAX_LENGTH} characters"
    if password.lower() == username.lower():
        return "password must differ from the username"
    if password.lower() in _common():
        return "this is one of the most common passwords (found in breached password lists)"
    estimate = zxcvbn(password[:ESTIMATE_CHARS], user_inputs=[username, *CONTEXT_WORDS])
    if estimate["score"] < MIN_SCORE:
        hint = estimate["feedback"]["warning"] or "add more words or characters that do not form a pattern"
        return f"password is too easy to guess: {hint.rstrip('.')}"
    return None
