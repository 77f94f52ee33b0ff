"""Edges that read the outside world: presets, config files, the Hub, GPU drivers."""
