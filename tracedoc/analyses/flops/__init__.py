"""FLOPs and the roofline: counted ops and their formulas, MFU, the kernels credited with each op's FLOPs, the
evidence tables, the per-op roofline and the model formula's estimate."""
