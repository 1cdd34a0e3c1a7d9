"""Compile time: kernel tags collected from Inductor's codegen (FLOPs, bytes, source line, nn.Module),
stored beside the FX graph cache, and the per-call markers that join a trace to them."""
