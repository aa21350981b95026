"""The features of the matrix, one module a family (see tests/interactions/matrix.py)."""
