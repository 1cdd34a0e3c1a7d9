"""Where each trace event's FLOPs and bytes come from: compile-time tags (from_tags), the kernel <- runtime <- op
join (launch), recorded shapes (from_shapes, ops/), where a cost is placed (placing) and collectives (comm)."""
