"""The warehouse: engine, the schema of every Seer table, reading a day, the partition writer.

Plain SQLAlchemy, no Dagster: `seer evaluate` opens its judgment store through the same
engine factory without loading Dagster; the Dagster resources are thin wrappers over this.
"""
