"""Bench: the smallest effect each audit can see at its size, and the sizes the cross-client paper's effects need.

    python bench/detectable.py

Every figure is ``fedmem.audit.intervals``'s, the rule the pages print as "under X": the smallest true excess of a
rate over its control that Newcombe's 95% interval excludes 0 for with probability 80% (an exact binomial power),
and for an attack's ROC AUC the smallest AUC whose 95% interval (Hanley and McNeil) excludes 0.5 as often.

Part 1: the excess MR detects at the sizes fedmem runs (pooled over the clients: n prefixes per client and arm,
times the clients), at base rates that bracket what the control reads on the synthetic data (0.2% to 5%).
Part 2: the prefixes per arm each effect the paper reports would need, from its Tables 1 and 2 (Qwen2.5-3B): the
difference MR_Intra - MR_Inter and MR_TotalFL - MR_TotalCL, read as an excess over the smaller figure with both arms
independent (the paper's Intra and Inter share their prefixes, so a paired test could need fewer).
Part 3: the AUC an attack must reach for its interval to leave 0.5, at the attack draws fedmem uses.
"""

from __future__ import annotations

from fedmem.audit.intervals import detectable_auc, detectable_excess, items_needed

SIZES = [  # (what, training prefixes per client, held-out prefixes per client, clients)
    ("test-sized run", 30, 30, 3), ("defenses preset", 150, 150, 3), ("default experiment", 200, 200, 3),
    ("600 per client and arm", 600, 600, 3), ("the paper's sizes", 4000, 2000, 3),
]
BASES = (0.002, 0.01, 0.02, 0.05)
# (table, task, the paper's two figures in %, what they compare)
PAPER = [
    ("Table 1", "summarization", 0.342, 0.046, "MR_Intra - MR_Inter"),
    ("Table 1", "dialog", 1.533, 1.446, "MR_Intra - MR_Inter"),
    ("Table 1", "QA", 1.450, 0.813, "MR_Intra - MR_Inter"),
    ("Table 2", "summarization", 0.433, 0.558, "MR_TotalFL - MR_TotalCL"),
    ("Table 2", "dialog", 3.992, 3.417, "MR_TotalFL - MR_TotalCL"),
    ("Table 2", "QA", 2.917, 2.150, "MR_TotalFL - MR_TotalCL"),
]
ATTACK_DRAWS = [("test-sized", 8, 8), ("membership attacks' draw, default (32 + 32 per client, 3 clients)", 96, 96),
                ("PEARL, default", 90, 30), ("600 + 600", 600, 600)]


def main() -> None:
    print("1. The smallest excess MR detects (points), pooled over the clients, at the control's base rate")
    print(f"{'setting':<26}{'train / held-out':>18}" + "".join(f"{f'base {b:.1%}':>13}" for b in BASES))
    for what, train, heldout, clients in SIZES:
        n1, n0 = train * clients, heldout * clients
        cells = [detectable_excess(b, n1, n0) for b in BASES]
        print(f"{what:<26}{f'{n1} / {n0}':>18}" + "".join(f"{100 * d:>13.2f}" for d in cells))
    print("\n2. Prefixes per arm the paper's effects need (80% power, two-sided 5%)")
    print(f"{'table':<9}{'task':<15}{'compares':<26}{'figures %':>16}{'effect pts':>12}{'n per arm':>12}")
    for table, task, a, b, what in PAPER:
        low, effect = min(a, b) / 100, abs(a - b) / 100
        n = items_needed(low, effect)
        print(f"{table:<9}{task:<15}{what:<26}{f'{a:.3f} / {b:.3f}':>16}{100 * effect:>12.3f}"
              f"{(f'{n:,}' if n else '> 1,000,000'):>12}")
    print("\n3. The smallest ROC AUC an attack's interval separates from 0.5")
    for what, members, nonmembers in ATTACK_DRAWS:
        print(f"{what:<70}{members:>5} + {nonmembers:<5}{detectable_auc(members, nonmembers):>8.3f}")


if __name__ == "__main__":
    main()
