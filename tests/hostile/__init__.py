"""The hostile-input tests' harness (`harness.py`) and the inputs cases share (`inputs.py`); the cases themselves are
in tests/test_hostile_<command>.py, one file per command."""
