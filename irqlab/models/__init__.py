"""Analytic models that measured runs are compared against (``irqlab model``)."""
