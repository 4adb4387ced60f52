"""fleetplan's version, at the bottom of the package: the optimizer's cache keys read it
(:func:`fleetplan.optimize.cache.code_key`) without importing the package's face."""

__version__ = "0.1.0"
