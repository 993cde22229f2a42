"""A deterministic Kafka cluster simulator built from replica_core's real components (§8, §9)."""
