"""Similarity between a batch's submissions: code fingerprints (winnowing) and identical wrong outputs."""
