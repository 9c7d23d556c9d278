"""Sensors: pending alerts, crashed runs, freshness results, and batch mode's batches."""
