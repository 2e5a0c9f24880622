"""The flow-level simulation backend: the same scheduler core and policies as the emulation, at any scale."""
