"""capjax.preemption.StopRequest: the first SIGTERM/SIGINT is recorded and the process goes on, a second one ends
it at once, the previous handlers come back on exit, and nothing is installed outside the main thread.
(The train loop's use of it, end to end: tests/test_main.py's SIGTERM test.)"""

import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from capjax import preemption


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_the_first_signal_is_recorded_and_the_previous_handlers_come_back(signum, capfd):
  def previous_term(*_):
    raise AssertionError("the previous SIGTERM handler ran inside the block")

  old_term = signal.signal(signal.SIGTERM, previous_term)
  old_int = signal.getsignal(signal.SIGINT)
  try:
    with preemption.StopRequest() as stop:
      assert not stop.requested and stop.name == ""
      os.kill(os.getpid(), signum)  # Python runs the handler before the next line
      assert stop.requested and stop.signum == signum and stop.name == signum.name
      # A second signal would now take the OS default action: end the process.
      assert signal.getsignal(signal.SIGTERM) == signal.getsignal(signal.SIGINT) == signal.SIG_DFL
    assert signal.getsignal(signal.SIGTERM) is previous_term
    assert signal.getsignal(signal.SIGINT) is old_int
  finally:
    signal.signal(signal.SIGTERM, old_term)
  assert capfd.readouterr().err == (f"\n{signum.name} received: saving a checkpoint and stopping after the current "
                                    "step; send it again to stop at once (that checkpoint is then lost)\n")


def test_without_a_signal_the_block_changes_nothing():
  before = {s: signal.getsignal(s) for s in preemption.SIGNALS}
  with preemption.StopRequest() as stop:
    assert all(signal.getsignal(s) == stop._handle for s in preemption.SIGNALS)
  assert not stop.requested
  assert {s: signal.getsignal(s) for s in preemption.SIGNALS} == before


def test_outside_the_main_thread_nothing_is_installed():
  before = {s: signal.getsignal(s) for s in preemption.SIGNALS}
  seen = []

  def run():
    with preemption.StopRequest() as stop:
      seen.append({s: signal.getsignal(s) for s in preemption.SIGNALS})
    seen.append(stop.requested)

  thread = threading.Thread(target=run)
  thread.start()
  thread.join()
  assert seen == [before, False]
  assert {s: signal.getsignal(s) for s in preemption.SIGNALS} == before


@pytest.mark.parametrize("first,second", [(signal.SIGTERM, signal.SIGTERM), (signal.SIGINT, signal.SIGINT),
                                          (signal.SIGTERM, signal.SIGINT)])
def test_a_second_signal_ends_the_process_at_once(first, second):
  script = textwrap.dedent(f"""
      import os, signal, time
      from capjax import preemption
      with preemption.StopRequest() as stop:
        os.kill(os.getpid(), {int(first)})
        print("stopping:", stop.name, flush=True)
        os.kill(os.getpid(), {int(second)})
        time.sleep(30)
      print("not reached", flush=True)
      """)
  proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  assert proc.returncode == -second, proc.stderr
  assert proc.stdout == f"stopping: {first.name}\n"
