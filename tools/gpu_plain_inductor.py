"""Is it us? One model of tools/gpu_models.py trained a few steps with plain ``backend="inductor"``
(no capture), to tell a failure of our backend from one of Inductor or the model's code:

    python3 tools/gpu_plain_inductor.py [CASE] [--device cuda|cpu]     # CASE: gpt2, llama, mixtral

Prints one line: the case, the backend, "ok" or the exception's first line, the graph breaks Dynamo
counted and the seconds it took.
"""

from __future__ import annotations

import argparse
import sys
import time

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from gpu_models import _BUILD  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case", nargs="?", default="mixtral", choices=sorted(_BUILD))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--backend", default="inductor")
    args = ap.parse_args(argv)
    import torch
    import torch._dynamo.utils as dutils

    torch.manual_seed(0)
    scope: dict = {}
    exec(_BUILD[args.case], scope)  # builds `m` and `cfg` from the case's tiny config
    m, cfg = scope["m"].to(args.device), scope["cfg"]
    ids = torch.randint(0, cfg.vocab_size, (8, 128), device=args.device)
    f = torch.compile(m, backend=args.backend)
    t0 = time.perf_counter()
    try:
        for _ in range(3):
            with torch.autocast(args.device, dtype=torch.bfloat16):
                loss = f(input_ids=ids, labels=ids).loss
            loss.backward()
            m.zero_grad()
        result = "ok"
    except Exception as e:  # the point: say what failed, in one line
        result = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"
    breaks = dutils.counters["graph_break"]
    print(f"{args.case} backend={args.backend}: {result}; graph breaks {sum(breaks.values())} "
          f"({'; '.join(k.strip().splitlines()[0] for k in list(breaks)[:3])[:400]}); {time.perf_counter() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
