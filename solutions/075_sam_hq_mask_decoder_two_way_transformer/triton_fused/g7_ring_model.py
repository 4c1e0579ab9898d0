"""A model of the Gluon phase 7's copy ring (kernel.py, `_i2t_gluon_kernel`): its loader warpgroup and two
consumer warpgroups, with mbarrier parity semantics, run under random interleavings to find deadlocks and reads
of a slot before its copy is signalled.

    python g7_ring_model.py [--runs 300]

The kernel's protocol: the loader fills ring slot g % NS with copy group g (piece g % 8 of tile g // 8), after
waiting on free[slot] with parity ((g // NS) & 1) ^ 1, and signals group g - LAG (ready[slot], and for a tile's
first piece turn[tile % 2]) once it has LAG newer groups in flight; consumer WG takes tiles WG, WG + 2, ...,
waits on turn[WG] before each tile and on ready[slot] with parity (g // NS) & 1 before each piece, and frees a
piece once the next piece's product is issued (the tile's last one at the tile's end). An mbarrier parity wait
passes whenever the barrier's current phase parity differs from the operand, so a wait more than one phase ahead
passes at once: without the turn barriers a consumer's first piece of a tile can sit in a slot whose previous
use (the other consumer's piece) is not yet signalled (NS < 9). The fp16 consumer (`early`) frees each slot as soon
as it has read it into its own x buffer. NOTES.md, "Session 22".
"""

from __future__ import annotations

import argparse
import random

PIECES = 8  # 32-channel pieces per 64-token tile


class Barrier:
    def __init__(self) -> None:
        self.phase = 0  # completed phases (arrival count 1: every arrive completes one)

    def arrive(self) -> None:
        self.phase += 1

    def passes(self, parity: int) -> bool:
        return self.phase % 2 != parity


def _loader(st: dict, ns: int, lag: int, n_t: int, turn: bool):
    def signal(gs: int):
        yield ("landed", gs)
        st["signalled"].add(gs)
        st["ready"][gs % ns].arrive()
        if turn and gs % PIECES == 0:
            st["turn"][(gs // PIECES) % 2].arrive()
        if not turn and gs == 0:  # the first version's operands barrier (turn[2]), completed with group 0
            st["turn"][2].arrive()

    g = 0
    for _ in range(n_t):
        for _ in range(PIECES):
            yield ("wait", st["free"][g % ns], ((g // ns) & 1) ^ 1)
            st["slot"][g % ns] = g  # the copy into the slot (visible once signalled)
            if g >= lag:
                yield from signal(g - lag)
            g += 1
    for r in range(lag):
        if g - lag + r >= 0:
            yield from signal(g - lag + r)


def _consumer(st: dict, ns: int, n_t: int, wg: int, turn: bool, early: bool):
    for i in range(wg, n_t, 2):
        if turn:
            yield ("wait", st["turn"][wg], ((i - wg) // 2) & 1)
        elif i == wg:
            yield ("wait", st["turn"][2], 0)  # the operands' barrier the first version waited on (group 0)
        for q in range(PIECES):
            g = i * PIECES + q
            yield ("wait", st["ready"][g % ns], (g // ns) & 1)
            if g not in st["signalled"] or st["slot"][g % ns] != g:
                st["stale"].append((wg, g))
            if early:  # the fp16 consumer: the slot is read into its own x buffer, so it goes back at once
                st["free"][g % ns].arrive()
            elif q > 0:
                st["free"][(g - 1) % ns].arrive()
        if not early:
            st["free"][(i * PIECES + PIECES - 1) % ns].arrive()


def run(ns: int, lag: int, n_t: int, seed: int, turn: bool = True, early: bool = False) -> str:
    """One random interleaving: 'ok', 'deadlock' or 'stale' (a piece read before its copy was signalled)."""
    rnd = random.Random(seed)
    st = {
        "free": [Barrier() for _ in range(ns)],
        "ready": [Barrier() for _ in range(ns)],
        "turn": [Barrier() for _ in range(3)],
        "slot": [None] * ns,
        "signalled": set(),
        "stale": [],
    }
    agents = [
        _loader(st, ns, lag, n_t, turn),
        _consumer(st, ns, n_t, 0, turn, early),
        _consumer(st, ns, n_t, 1, turn, early),
    ]
    state = [next(a, None) for a in agents]
    while True:
        enabled = [
            k for k, s in enumerate(state) if s is not None and (s[0] == "landed" or s[1].passes(s[2]))
        ]
        if not enabled:
            return "deadlock" if any(s is not None for s in state) else ("stale" if st["stale"] else "ok")
        k = rnd.choice(enabled)
        state[k] = next(agents[k], None)


def outcomes(ns: int, lag: int, n_t: int, runs: int, turn: bool = True, early: bool = False) -> set[str]:
    return {run(ns, lag, n_t, seed, turn, early) for seed in range(runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="random interleavings per case")
    runs = parser.parse_args().runs
    for turn, early in ((True, False), (False, False), (True, True)):
        for ns, lag, n_t in ((6, 2, 2), (6, 4, 8), (9, 7, 8), (10, 2, 2), (10, 8, 8), (6, 5, 1), (10, 9, 2)):
            found = sorted(outcomes(ns, lag, n_t, runs, turn, early))
            print(f"turn={turn} free early={early} NS={ns} LAG={lag} tiles={n_t}: {found}")


if __name__ == "__main__":
    main()
