"""A synthetic quorum that publishes correct contract records with scripted faults: how the
streaming job is developed, tested and benchmarked without running real nodes."""
from quorum.synthetic.faults import FAULT_KINDS, Fault, FaultSpecError, TimelineEntry, demo_faults, parse_fault
from quorum.synthetic.config import SyntheticConfig
from quorum.synthetic.model import SyntheticQuorum
from quorum.synthetic.publish import PublishStats, publish

__all__ = ["FAULT_KINDS", "Fault", "FaultSpecError", "TimelineEntry", "demo_faults", "parse_fault",
           "SyntheticConfig", "SyntheticQuorum", "PublishStats", "publish"]
