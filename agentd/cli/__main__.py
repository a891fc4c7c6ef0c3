"""`python -m agentd.cli`: the same as the `agentd` script."""

from agentd.cli import main

main()
