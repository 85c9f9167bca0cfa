"""Chinese translations of the exercise checks' verdicts and hints (see :mod:`dynagraph._language`).

Keys are the English messages exactly as the checks pass them to ``tr``; names in
braces stay as they are. ``tests/test_language.py`` checks that every message has one
entry here and every entry a message.
"""

MESSAGES: dict[str, str] = {
}
