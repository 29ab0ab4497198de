"""The facts file's simulation scenarios, each as a named test, plus the zombie-leader and
pre-vote scenarios the seeds describe. Every step runs the invariant checks."""
from quorum.raft.config import RaftConfig
from quorum.sim import Faults, Simulation


def _sim(voters=3, observers=0, seed=1):
    return Simulation(seed, voters, observers, Faults.none())


def _elect(sim, timeout_ms=10_000):
    sim.run_until(lambda: sim.leader() is not None, timeout_ms, "a leader")
    return sim.leader()


def _commit(sim, timeout_ms=10_000):
    """Append through the leader and wait until a majority committed it."""
    leader = sim.leader()
    first, _ = sim.client_append(1)
    n = sim.nodes[leader]
    sim.run_until(lambda: n.published_hw > first, timeout_ms, f"offset {first} committed")
    return first


def test_initial_election_elects_exactly_one_leader_and_everyone_follows():
    sim = _sim(voters=5, observers=2)
    leader = _elect(sim)
    sim.run_for(1000)
    epochs = {n.raft.epoch for n in sim.nodes.values()}
    assert len(epochs) == 1
    assert all(n.raft.leader_id == leader for n in sim.nodes.values())
    assert sum(n.raft.is_leader for n in sim.nodes.values()) == 1


def test_single_voter_elects_itself_and_commits():
    sim = _sim(voters=1, observers=1)
    _elect(sim)
    _commit(sim)


def test_leader_killed_a_new_leader_is_elected_and_commits():
    sim = _sim()
    old = _elect(sim)
    _commit(sim)
    sim.crash(old)
    sim.run_until(lambda: sim.leader() not in (None, old), 10_000, "a new leader")
    _commit(sim)
    sim.restart(old)
    sim.run_for(3000)
    assert sim.nodes[old].raft.leader_id == sim.leader()


def test_leader_partitioned_away_resigns_by_check_quorum_and_the_majority_elects_another():
    sim = _sim()
    old = _elect(sim)
    _commit(sim)
    pairs = sim.isolate(old)
    sim.run_until(lambda: sim.leader() not in (None, old), 10_000, "a leader in the majority")
    sim.run_until(lambda: not sim.nodes[old].raft.is_leader, 5000, "the zombie leader resigns")
    _commit(sim)
    sim.heal(pairs)
    sim.run_for(5000)
    assert sim.nodes[old].raft.leader_id == sim.leader()


def test_progress_with_only_a_majority_reachable_5_voters_split_2_3_then_healed():
    sim = _sim(voters=5)
    leader = _elect(sim)
    minority = [leader, (leader + 1) % 5]
    majority = [i for i in range(5) if i not in minority]
    sim.partition(minority, majority)
    sim.run_until(lambda: sim.leader() in majority, 15_000, "a leader among the three")
    committed = _commit(sim)
    for i in minority:   # the minority never commits anything new
        assert sim.nodes[i].raft.high_watermark <= committed
    sim.heal()
    sim.run_until(lambda: all(n.applied > committed for n in sim.nodes.values()), 10_000, "all caught up")
    sim.check_final_agreement()


def test_back_to_back_leader_failures():
    sim = _sim(voters=5)
    for _ in range(2):
        leader = _elect(sim)
        _commit(sim)
        sim.crash(leader)
    _elect(sim)
    _commit(sim)
    sim.check_final_agreement()


def test_all_nodes_killed_restart_and_keep_every_committed_record():
    sim = _sim(voters=3, observers=1)
    _elect(sim)
    for _ in range(5):
        _commit(sim)
    committed = len(sim.committed)
    sim.kill_all(restart_after_ms=500)
    sim.run_for(600)
    _elect(sim)
    _commit(sim)
    assert len(sim.committed) > committed
    sim.check_final_agreement()


def test_partitioned_follower_returning_does_not_disrupt_the_leader_thanks_to_pre_vote():
    sim = _sim(voters=3)
    leader = _elect(sim)
    epoch = sim.nodes[leader].raft.epoch
    follower = (leader + 1) % 3
    pairs = sim.isolate(follower)
    sim.run_for(20_000)         # many election timeouts while cut off
    assert sim.nodes[follower].raft.epoch == epoch
    sim.heal(pairs)
    sim.run_for(5000)
    assert sim.leader() == leader and sim.nodes[leader].raft.epoch == epoch


def test_graceful_shutdown_hands_over_before_the_election_timeout():
    sim = _sim(voters=3)
    leader = _elect(sim)
    _commit(sim)
    start = sim.now
    sim.graceful_shutdown(leader)
    took = sim.run_until(lambda: sim.leader() not in (None, leader), 5000, "a successor")
    assert took < sim.config.election_timeout_ms   # EndQuorumEpoch: position 0 starts at once
    assert sim.now - start == took


def test_crash_loses_unflushed_data_but_nothing_committed():
    sim = _sim(voters=3)
    leader = _elect(sim)
    _commit(sim)
    sim.client_append(3)          # appended, flush pending
    n = sim.nodes[leader]
    assert n.log.end_offset() > n.log.flushed_end_offset()
    sim.crash(leader)
    assert n.log.end_offset() == n.log.flushed_end_offset()
    sim.restart(leader)
    _elect(sim)
    _commit(sim)
    sim.check_final_agreement()


def test_voter_disk_loss_rejoins_without_a_vote_and_catches_up():
    sim = _sim(voters=3, seed=3)
    leader = _elect(sim)
    for _ in range(3):
        _commit(sim)
    victim = (leader + 1) % 3
    sim.run_for(1000)            # let the victim catch up so the others still hold a majority
    assert sim.lose_disk(victim, restart_after_ms=100)
    sim.run_for(200)
    _commit(sim)
    sim.run_until(lambda: sim.nodes[victim].applied >= len(sim.committed), 10_000, "the wiped voter catches up")
    assert sim.nodes[victim].raft.state_name == "observer"


def test_pause_longer_than_every_timeout_on_the_leader():
    sim = _sim(voters=3)
    leader = _elect(sim)
    _commit(sim)
    sim.pause(leader, 8000)
    sim.run_until(lambda: sim.leader() not in (None, leader), 10_000, "a new leader during the pause")
    _commit(sim)
    sim.run_for(9000)            # the old leader wakes up, learns the new epoch
    assert not sim.nodes[leader].raft.is_leader
    _commit(sim)
    sim.check_final_agreement()


def test_one_way_partition_leader_cannot_send():
    sim = _sim(voters=3)
    leader = _elect(sim)
    pairs = sim.block([(leader, o) for o in sim.nodes if o != leader])
    sim.run_until(lambda: sim.leader() not in (None, leader), 15_000, "a leader that can talk")
    sim.heal(pairs)
    _commit(sim)
    sim.check_final_agreement()


# --- liveness scenarios: each would have caught one of the stalls the core had, and each
# --- states its bound (simulated time after the fault ends).

def test_voter_reaching_its_leader_but_not_a_majority_goes_back_to_fetching():
    # 5 voters; V is cut off long enough to start pre-vote rounds, then reaches the leader
    # and one follower only. Its pre-votes can win nothing and be refused by no majority; a
    # round that times out returns it to its leader. Bound: caught up within 5 s (one pre-vote
    # round, at most 2 x election timeout, plus fetches); it stayed prospective for 120+ s.
    sim = _sim(voters=5, seed=4)
    leader = _elect(sim)
    _commit(sim)
    v = (leader + 1) % 5
    friend = (leader + 2) % 5
    others = [i for i in range(5) if i not in (leader, v, friend)]
    pairs = sim.isolate(v)
    sim.run_until(lambda: sim.nodes[v].raft.state_name == "prospective", 10_000, "V starts a pre-vote")
    sim.heal(pairs)
    sim.block([(v, o) for o in others] + [(o, v) for o in others])
    for _ in range(20):
        sim.client_append(1)
        sim.run_for(50)
    took = sim.await_caught_up(5000, [v], "the half-connected voter catches up")
    assert took < 5000 and sim.nodes[v].raft.state_name == "follower"


def test_deposed_leader_with_a_long_uncommitted_tail_rejoins_an_idle_quorum():
    # The old leader is cut off, appends 400 records nobody else has, and the majority elects
    # a new leader whose log stays far shorter (idle: only NoOps). On healing its fetches are
    # past the new leader's log end: DivergingEpoch makes it truncate (it used to get 9,000+
    # OFFSET_OUT_OF_RANGE answers). Bound: caught up within 5 s of healing.
    sim = _sim(voters=3, seed=2)
    old = _elect(sim)
    _commit(sim)
    pairs = sim.isolate(old)
    for _ in range(4):
        sim.client_append(100)
    sim.run_until(lambda: sim.leader() not in (None, old), 10_000, "a leader in the majority")
    new = sim.leader()
    assert sim.nodes[old].log.end_offset() > sim.nodes[new].log.end_offset() + 300
    sim.heal(pairs)
    took = sim.await_caught_up(5000, None, "the deposed leader truncates and catches up")
    assert sim.nodes[old].log.end_offset() <= sim.nodes[new].log.end_offset() + 1
    sim.check_final_agreement()
    assert took < 5000


def test_leader_that_restarts_hands_over_with_end_quorum_epoch():
    # A restarted leader comes back resigned in its epoch and sends EndQuorumEpoch, so the
    # others elect at once rather than waiting out their fetch timeout (2 s) and a pre-vote.
    # Bound: a new leader within 1 s (the successor backoff max) of the restart.
    sim = _sim(voters=3, seed=5)
    leader = _elect(sim)
    _commit(sim)
    sim.crash(leader)
    sim.restart(leader)
    took = sim.run_until(lambda: sim.leader() not in (None, leader), 1000, "a leader after the restart")
    assert took < sim.config.fetch_timeout_ms
    sim.await_caught_up(3000)


def test_lost_end_quorum_epoch_is_sent_again():
    # Every EndQuorumEpoch of a resignation is lost; the resigned leader (still running) sends
    # them again once the requests time out. Bound: with a 300 ms request timeout, a new leader
    # within 1 s of the resignation, before any follower's fetch timeout (2 s) could help.
    sim = Simulation(6, 3, 0, Faults.none(), config=RaftConfig(request_timeout_ms=300))
    leader = _elect(sim)
    _commit(sim)
    sim.run_for(100)
    pairs = sim.block([(leader, o) for o in sim.nodes if o != leader])
    sim.resign(leader)
    sim.run_for(50)
    sim.heal(pairs)
    took = sim.run_until(lambda: sim.leader() not in (None, leader), 1000, "a successor")
    assert took < 1000
    sim.await_caught_up(3000)
