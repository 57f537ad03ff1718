"""`python -m tms`: the same as the `tms` command."""

from tms.cli import main

main()
