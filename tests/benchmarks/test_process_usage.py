"""The benchmarks' CPU accounting: what a job's processes run and wait for counts, the
benchmark's own finished children do not."""
import os
import subprocess
import sys
import threading
import time

from benchmarks.process_usage import TreeCpu, task_cpu_seconds

BURN = "import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end: pass\n"
# Runs short CPU-bound children one after another, as the Spark JVM runs `chmod` for each
# checkpoint file, then stays up until its stdin closes.
SPAWNER = f"""
import subprocess, sys
for _ in range(5):
    subprocess.run([sys.executable, "-c", {BURN.format(seconds=0.1)!r}], check=True)
print("done", flush=True)
sys.stdin.read()
"""


def test_a_descendants_ended_children_count_and_the_roots_own_do_not():
    tree = TreeCpu(os.getpid())
    before = tree.seconds()
    # the root's own child (a benchmark's load generator that has finished): not the job's
    subprocess.run([sys.executable, "-c", BURN.format(seconds=1.0)], check=True)
    spawner = subprocess.Popen([sys.executable, "-c", SPAWNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True)
    try:
        assert spawner.stdout.readline().strip() == "done"
        used = TreeCpu.used(before, tree.seconds())
    finally:
        spawner.stdin.close()
        spawner.wait(timeout=30)
    # five children of 0.1 s each, their interpreters' start-up and the spawner's own; without
    # the root's 1 s child
    assert 0.5 <= used < 1.4, used



def test_a_threads_cpu_is_its_own_not_its_processes():
    burnt, done = threading.Event(), threading.Event()

    def burn():
        end = time.thread_time() + 0.3
        while time.thread_time() < end:
            pass
        burnt.set()
        done.wait()

    busy, idle = threading.Thread(target=burn), threading.Thread(target=done.wait)
    busy.start(), idle.start()
    burnt.wait()
    try:
        assert task_cpu_seconds(os.getpid(), busy.native_id) >= 0.25
        assert task_cpu_seconds(os.getpid(), idle.native_id) < 0.05
    finally:
        done.set()
        busy.join(), idle.join()
