"""Dagster resources: the warehouse (thin, over `seer_pipelines.warehouse`) and the evaluator."""
