"""The gdn2-pallas family: gdn2-pallas 0.1.1's fused Pallas GDN-2, forward and backward."""
