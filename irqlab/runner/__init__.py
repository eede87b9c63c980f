"""Runner layer: host facts, accelerator choice and the QEMU guest target."""
