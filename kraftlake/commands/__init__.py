"""Subcommands of the `kraftlake` CLI, one module each: ``add_arguments(parser)`` and ``run(args) -> int``."""
