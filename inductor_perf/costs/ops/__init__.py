"""The cost of one aten (or fbgemm) op from its recorded shapes: hand formulas, torch's meta kernels."""
