"""JSON message schemas of the quorum RPCs that kafka-python does not ship (Vote,
BeginQuorumEpoch, EndQuorumEpoch), in Kafka's message-schema format, loaded by
kafka-python's `ApiMessage` classes in `quorum.wire.apis`."""
