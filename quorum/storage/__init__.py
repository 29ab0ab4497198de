"""Durable storage of a quorum node: the segment-file log of Kafka record batches
(`segment_log`), the atomically replaced quorum-state file (`quorum_state_file`), the
persisted epoch cache (`epoch_cache`) and the data directory's identity (`meta`)."""
