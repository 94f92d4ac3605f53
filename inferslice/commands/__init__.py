"""One module per ``inferslice`` subcommand (see inferslice/cli.py)."""
