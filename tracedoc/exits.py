"""Exit codes of every tracedoc command (docs/ci.md: exit codes); errors carry theirs (``errors.py``)."""

EXIT_OK = 0
EXIT_ERROR = 1  # a TracedocError (bad input, unreadable file, failed analysis)
EXIT_USAGE = 2  # bad arguments
EXIT_FAIL_ON = 3  # a finding at or above --fail-on
EXIT_GATE = 3  # tracedoc diff: the regression gate (--fail-on-regression, --fail-if) failed
EXIT_INTERRUPTED = 130  # Ctrl-C, as shells report SIGINT
