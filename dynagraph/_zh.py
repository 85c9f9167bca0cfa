"""Chinese translations of the package's learner-facing messages (see :mod:`dynagraph._language`).

Keys are the English messages exactly as the code passes them to ``tr``; names in
braces stay as they are. ``tests/test_language.py`` checks that every message has one
entry here and every entry a message.
"""

MESSAGES: dict[str, str] = {
}
