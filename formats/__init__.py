"""formats: statectl's checkpoint format, the Flink reader and the Spark jobs (coming issues)."""
