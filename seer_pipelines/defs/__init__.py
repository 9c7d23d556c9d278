"""The Dagster objects of the code location, by kind: assets, checks, sensors, resources,
the daily partitions and the job with its schedule. `seer_pipelines.definitions` gathers them."""
