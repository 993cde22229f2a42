"""replica_core: Apache Kafka's broker-side replication and log storage core.

Layers, one way: records -> storage -> replication -> fetcher -> controller -> sim -> spark.
"""

__version__ = "0.1.0"
"""The package version (pyproject reads it from here): the same whether installed or run from
a source tree, so a run's recorded configuration does not depend on how it was started."""

__all__ = ["__version__"]
