"""Hypothesis drives the simulator with faults as rules, so a failing schedule shrinks to a
minimal one. Invariants are checked after every simulated event; at the end everything heals
and a new record must commit."""
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from quorum.sim import Faults, Simulation

NODES = st.integers(min_value=0, max_value=5)


class QuorumUnderFaults(RuleBasedStateMachine):

    @initialize(seed=st.integers(0, 2**16), voters=st.integers(1, 5), observers=st.integers(0, 1))
    def start(self, seed, voters, observers):
        # background noise as in the random runs (3% drops, 2% duplicates, 1-25 ms delays);
        # every other fault comes from a rule
        self.sim = Simulation(seed, voters, observers, Faults(enabled=False))
        self.sim.start_client_traffic()
        self.size = voters + observers
        self.sim.run_for(3000)   # the first election

    def _after_fault(self):
        # a fault only matters if the quorum runs with it for a while
        self.sim.run_for(1500)

    def _node(self, n):
        return n % self.size

    @rule(ms=st.integers(100, 8000))
    def run(self, ms):
        self.sim.run_for(ms)

    @rule(count=st.integers(1, 5))
    def append(self, count):
        self.sim.client_append(count)

    @rule(n=NODES, back_ms=st.one_of(st.none(), st.integers(0, 5000)))
    def crash(self, n, back_ms):
        self.sim.crash(self._node(n), back_ms)
        self._after_fault()

    @rule(n=NODES)
    def restart(self, n):
        self.sim.restart(self._node(n))
        self._after_fault()

    @rule(n=NODES)
    def graceful_shutdown(self, n):
        self.sim.graceful_shutdown(self._node(n), 1000)
        self._after_fault()

    @rule(n=NODES)
    def lose_disk(self, n):
        self.sim.lose_disk(self._node(n), 500)
        self._after_fault()

    @rule(n=NODES)
    def isolate(self, n):
        self.sim.isolate(self._node(n))
        self._after_fault()

    @rule(n=NODES, outgoing=st.booleans())
    def one_way_partition(self, n, outgoing):
        n = self._node(n)
        others = [o for o in self.sim.nodes if o != n]
        self.sim.block([(n, o) for o in others] if outgoing else [(o, n) for o in others])
        self._after_fault()

    @rule(cut=st.integers(1, 5))
    def split(self, cut):
        ids = list(self.sim.nodes)
        self.sim.partition(ids[:cut % len(ids) or 1])
        self._after_fault()

    @rule()
    def random_fault(self):
        """One fault drawn by the simulator itself (with its own heal or restart timer)."""
        self.sim.inject_random_fault()
        self._after_fault()

    @rule()
    def heal(self):
        self.sim.heal()
        self._after_fault()

    @rule(n=NODES, ms=st.integers(3500, 9000))
    def pause(self, n, ms):
        self.sim.pause(self._node(n), ms)
        self._after_fault()

    @rule(back_ms=st.integers(0, 3000))
    def kill_all(self, back_ms):
        self.sim.kill_all(back_ms)
        self._after_fault()

    @rule(drop=st.sampled_from([0.0, 0.05, 0.3]), duplicate=st.sampled_from([0.0, 0.1]),
          delay=st.sampled_from([1, 25, 200]))
    def network_noise(self, drop, duplicate, delay):
        self.sim.drop, self.sim.duplicate = drop, duplicate
        self.sim.faults.max_delay_ms = delay

    def teardown(self):
        if hasattr(self, "sim"):
            self.sim.faults.max_delay_ms = 25
            self.sim.heal_all()
            self.sim.await_progress(60_000)
            self.sim.check_final_agreement()


QuorumUnderFaults.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
test_quorum_under_faults = QuorumUnderFaults.TestCase
