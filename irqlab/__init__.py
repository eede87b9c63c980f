"""irqlab: interrupt latency lab for bare metal and virtual machines."""

__version__ = "0.1.0"
