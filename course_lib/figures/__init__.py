"""Tables and figures with their provenance, and the course's pictures (mma fragments, wgmma layouts)."""
