"""The `seer` commands: each module has `add_arguments(parser)` and `run(args) -> int`."""


class UsageError(Exception):
    """Unusable input or option: `seer` prints `error: ...` and exits with code 2."""
