"""Scheduling policies shipped with hybridbed; each registers under the `hybridbed.policies` entry point group."""
