"""A quorum node as a process: the Raft core (`quorum.raft`) driven by an asyncio loop,
talking Kafka's wire protocol to its peers (`quorum.wire`), keeping its log and state on
disk (`quorum.storage`) and publishing events to the events topic (`publisher`)."""
