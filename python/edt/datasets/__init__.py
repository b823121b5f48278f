"""Datasets for examples and tests: MNIST's IDX format and a synthetic,
learnable MNIST-like set in that format."""
