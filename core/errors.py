"""The one exception type core raises for bad input.

Pages show its message as a notice, the CLI prints it on one line and exits 2; anything else that
escapes core is a bug, not a user error.
"""


class InputError(ValueError):
    """A user-facing problem with the inputs: the message says what is wrong and what is allowed. `keys` names the
    inputs at fault where the message alone does not start with one (a page resets them and computes the rest:
    core.views.fallback)."""

    def __init__(self, message: str = "", keys: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.keys = tuple(keys)
