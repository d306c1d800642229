"""The ``tahrix`` subcommands, one module per group; each has ``add_commands(subparsers)``.
Heavy imports happen inside the handlers, so ``tahrix --help`` loads none of them."""
