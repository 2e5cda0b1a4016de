"""The paper's cross-domain experiment (Sharma et al. 2018, Tables 5-7): trained workdirs × test sets, scored, beside
the paper's published figures (`paper.py`); `matrix.py` computes it, `report.py` writes it, `__main__` is the command.
"""
