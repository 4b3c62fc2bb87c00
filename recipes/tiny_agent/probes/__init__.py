"""Probes of the tiny agent: reading, media dependence, Observation accuracy, turn labels."""
