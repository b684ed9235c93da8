"""The binary min-heap of the simulator's delayed credits (UGAL-L_CR, Kim et al. §4.3):
credits that come back after different delays arrive out of order, so they wait here by due
time instead of in the engine's credit FIFO.  Four parallel arrays (due time, credit counter,
amount, the round trip the credit completes); the size lives with the caller.  Push and pop
are O(log n), compiled and inlined into :func:`simulator.engine.run_cycles`.
"""

from __future__ import annotations

from numba import njit


@njit(cache=True, inline="always")
def hp_push(hp_time, hp_idx, hp_amt, hp_rt, n, when, idx, amt, rt):
    """Push a credit due at ``when`` onto the binary min-heap of ``n`` entries (UGAL-L_CR's
    delayed credits); returns the new size, or -1 when the heap is full."""
    if n == hp_time.shape[0]:
        return -1
    k = n
    while k > 0:
        par = (k - 1) >> 1
        if hp_time[par] <= when:
            break
        hp_time[k], hp_idx[k], hp_amt[k], hp_rt[k] = hp_time[par], hp_idx[par], hp_amt[par], \
            hp_rt[par]
        k = par
    hp_time[k], hp_idx[k], hp_amt[k], hp_rt[k] = when, idx, amt, rt
    return n + 1


@njit(cache=True, inline="always")
def hp_pop(hp_time, hp_idx, hp_amt, hp_rt, n):
    """Remove the earliest entry of the heap (the caller read it at index 0); returns the new
    size."""
    n -= 1
    when, idx, amt, rt = hp_time[n], hp_idx[n], hp_amt[n], hp_rt[n]
    k = 0
    while True:
        c = 2 * k + 1
        if c >= n:
            break
        if c + 1 < n and hp_time[c + 1] < hp_time[c]:
            c += 1
        if hp_time[c] >= when:
            break
        hp_time[k], hp_idx[k], hp_amt[k], hp_rt[k] = hp_time[c], hp_idx[c], hp_amt[c], hp_rt[c]
        k = c
    hp_time[k], hp_idx[k], hp_amt[k], hp_rt[k] = when, idx, amt, rt
    return n
