"""The typer CLI (``fleetplan``); see :mod:`fleetplan.cli.app`."""
