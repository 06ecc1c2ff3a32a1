"""Kernels and operators: kernel statistics and Tensor Core share, name classification, the operator view,
compiled regions."""
