"""Memory: device memory peaks and curve, memory copies by direction."""
