"""The one exception type the CLI turns into a one-line error message."""


class TvisError(Exception):
    """A problem the user can act on: printed as `tvis: error: <message>`, exit code 2.

    Raise it with a single-line message naming the path, value or option at fault.
    """

    exit_code = 2
