"""Tools measuring the package itself (no torch import)."""
