"""Pure models, one per concept, with units in their names: no GPU, no CuPy, no records."""
