"""replica_core: Apache Kafka's broker-side replication and log storage core.

Layers, one way: records -> storage -> replication -> fetcher -> controller -> sim -> spark.
"""
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("replica_core")
except PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.0.0+src"

__all__ = ["__version__"]
