"""Shared by every backend and imports nothing above it: parameters, shapes, windows, filters."""
