"""Calculators, one module per notebook on a small base: thin ipywidgets layers over the models."""
