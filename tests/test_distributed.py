"""capjax.distributed: jax.distributed starts only when asked or when a cluster is detected; `sync` is a no-op in
one process. (The multi-process path: tests/test_multihost.py, and launch/multiprocess_cpu.sh.)"""

import jax
import pytest

from capjax import distributed


@pytest.fixture
def no_cluster(monkeypatch):
  for name in distributed.CLUSTER_ENV:
    monkeypatch.delenv(name, raising=False)


def test_a_cluster_is_detected_from_its_environment(no_cluster, monkeypatch):
  assert not distributed.cluster_detected()
  monkeypatch.setenv("SLURM_JOB_ID", "123")
  assert distributed.cluster_detected()


def test_auto_and_off_stay_single_process_without_a_cluster(no_cluster, monkeypatch):
  calls = []
  monkeypatch.setattr(jax.distributed, "initialize", lambda *a, **k: calls.append((a, k)))
  monkeypatch.setattr(jax.config, "update", lambda *a: calls.append(a))  # the CPU collectives switch
  distributed.maybe_initialize("auto")
  distributed.maybe_initialize("off")
  assert calls == []
  monkeypatch.setenv("SLURM_JOB_ID", "123")
  distributed.maybe_initialize("off")
  assert calls == []
  distributed.maybe_initialize("auto")
  assert calls[-1] == ((), {})  # jax.distributed.initialize() reads the cluster's own environment


def test_an_unknown_mode_is_an_error():
  with pytest.raises(ValueError, match="distributed mode 'maybe'"):
    distributed.maybe_initialize("maybe")


def test_sync_in_one_process_returns_at_once():
  assert jax.process_count() == 1
  distributed.sync("capjax_test")


def test_on_without_a_cluster_says_what_to_set_before_touching_jax(no_cluster, monkeypatch):
  calls = []
  monkeypatch.setattr(jax.distributed, "initialize", lambda *a, **k: calls.append((a, k)))
  monkeypatch.setattr(distributed, "jax_detects_a_cluster", lambda: False)
  with pytest.raises(distributed.NoClusterError) as error:
    distributed.maybe_initialize("on")
  assert str(error.value).startswith("--distributed=on but no cluster was detected")
  assert "JAX_COORDINATOR_ADDRESS" in str(error.value) and "--distributed=auto" in str(error.value)
  assert calls == []


def test_on_where_only_jax_detects_a_cluster_initializes(no_cluster, monkeypatch):
  calls = []
  monkeypatch.setattr(jax.distributed, "initialize", lambda *a, **k: calls.append((a, k)))
  monkeypatch.setattr(jax.config, "update", lambda *a: None)
  monkeypatch.setattr(distributed, "jax_detects_a_cluster", lambda: True)  # Open MPI, Kubernetes: jax's own
  distributed.maybe_initialize("on")
  assert calls == [((), {})]

