"""The frontend's core, which every other part builds on: gpuc's types and type specs, the decorators'
functions, the stubs of the index space, plans and the `Handler` base of every construct, the typing
environment, porting hints, and the registry through which constructs make themselves known to the
passes (registry.py). It imports nothing else of the frontend."""
