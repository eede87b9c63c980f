"""Xen-side data: xentrace binary records and scheduler timelines (irqlab.xen.trace)."""
