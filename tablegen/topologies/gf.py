"""Finite fields GF(p^k) with table arithmetic, for the Slim Fly (MMS) construction.

Elements are encoded as integers ``0 .. q-1``: the coefficient vector ``(c_0, …, c_{k-1})`` of
``c_0 + c_1 x + … + c_{k-1} x^{k-1}`` read in base ``p`` (``c_0`` least significant).  For a
prime ``q`` this is plain arithmetic modulo ``q``.  For ``q = p^k`` the field is
``F_p[x] / (f)`` with the pinned primitive polynomial ``f`` of :data:`PINNED_POLYNOMIALS`:
the first monic degree-``k`` polynomial, in increasing order of its encoding
``sum(c_i p^i)`` over its low coefficients, that is irreducible and has ``x`` as a primitive
element.  Pinning it keeps switch labels and port maps reproducible across versions.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from tablegen.errors import TopologyError

# q -> low coefficients (c_0, …, c_{k-1}) of the monic primitive polynomial (leading 1 implied).
# Produced by `first_primitive_polynomial` and pinned here; tests recompute and compare.
PINNED_POLYNOMIALS: dict[int, tuple[int, ...]] = {
    4: (1, 1),  # x^2 + x + 1
    8: (1, 1, 0),  # x^3 + x + 1
    9: (2, 1),  # x^2 + x + 2
    16: (1, 1, 0, 0),  # x^4 + x + 1
    25: (2, 1),  # x^2 + x + 2
    27: (1, 2, 0),  # x^3 + 2x + 1
    32: (1, 0, 1, 0, 0),  # x^5 + x^2 + 1
    49: (3, 1),  # x^2 + x + 3
    64: (1, 1, 0, 0, 0, 0),  # x^6 + x + 1
    81: (2, 1, 0, 0),  # x^4 + x + 2
    121: (7, 1),  # x^2 + x + 7
    125: (2, 3, 0),  # x^3 + 3x + 2
    128: (1, 1, 0, 0, 0, 0, 0),  # x^7 + x + 1
}


def prime_power(q: int) -> tuple[int, int] | None:
    """``(p, k)`` with ``q = p**k`` for a prime ``p``, or ``None``.  O(sqrt q)."""
    if q < 2:
        return None
    p = next((d for d in range(2, int(q**0.5) + 1) if q % d == 0), q)
    k, r = 0, q
    while r % p == 0:
        r //= p
        k += 1
    return (p, k) if r == 1 else None


class GF:
    """The finite field of order ``q`` with ``add``, ``sub``, ``mul`` lookup tables.

    Parameters:
        q: a prime power.
        poly: low coefficients of the modulus for ``q = p^k``, ``k > 1``; defaults to the pinned
            primitive polynomial.

    Building the tables costs O(q^2) time and memory, fine for every Slim Fly that fits a
    machine room (q <= 128).
    """

    def __init__(self, q: int, poly: tuple[int, ...] | None = None):
        pk = prime_power(q)
        if pk is None:
            raise TopologyError(f"q={q} is not a prime power; expected q = p^k for a prime p")
        self.q, (self.p, self.k) = q, pk
        if self.k == 1:
            self.poly: tuple[int, ...] = ()
            e = np.arange(q)
            self.add = (e[:, None] + e[None, :]) % q
            self.mul = (e[:, None] * e[None, :]) % q
        else:
            self.poly = tuple(poly) if poly is not None else PINNED_POLYNOMIALS.get(q) \
                or first_primitive_polynomial(self.p, self.k)
            self.add, self.mul = _poly_tables(self.p, self.k, self.poly)
        self.neg = np.argmin(self.add, axis=1)  # the x with a + x = 0
        self.sub = self.add[:, self.neg]        # a - b = a + (-b)

    def power(self, a: int, e: int) -> int:
        if a == 0:
            return 1 if e == 0 else 0
        r = 1
        for _ in range(e % (self.q - 1)):
            r = int(self.mul[r, a])
        return r

    def order(self, a: int) -> int:
        """Multiplicative order of a non-zero element."""
        r, n = a, 1
        while r != 1:
            r, n = int(self.mul[r, a]), n + 1
        return n

    def primitive_elements(self) -> list[int]:
        return [a for a in range(1, self.q) if self.order(a) == self.q - 1]

    def smallest_primitive(self) -> int:
        return next(a for a in range(1, self.q) if self.order(a) == self.q - 1)


def _poly_tables(p: int, k: int, low: tuple[int, ...]):
    q = p**k
    digits = np.array([[(a // p**i) % p for i in range(k)] for a in range(q)])
    weights = p ** np.arange(k)
    add = ((digits[:, None, :] + digits[None, :, :]) % p) @ weights
    # Multiply a by x repeatedly (shift + reduce by the modulus) to get a * x^i for every i.
    xpow = np.empty((k, q), dtype=np.int64)
    cur = digits.copy()
    red = (-np.array(low)) % p  # x^k = -(c_0 + … + c_{k-1} x^{k-1})
    for i in range(k):
        xpow[i] = cur @ weights
        top = cur[:, -1].copy()
        cur = np.roll(cur, 1, axis=1)
        cur[:, 0] = 0
        cur = (cur + top[:, None] * red[None, :]) % p
    # a * b = sum_i b_i * (a x^i), accumulated in digit space.
    mul = np.zeros((q, q), dtype=np.int64)
    acc = np.zeros((q, q, k), dtype=np.int64)
    xdig = np.stack([digits[xpow[i]] for i in range(k)])  # [i, a, digit]
    for i in range(k):
        acc = (acc + digits[None, :, i, None] * xdig[i][:, None, :]) % p
    mul = acc @ weights
    return add.astype(np.int64), mul.astype(np.int64)


@lru_cache(maxsize=None)
def first_primitive_polynomial(p: int, k: int) -> tuple[int, ...]:
    """First monic polynomial of degree ``k`` over F_p (by the encoding of its low
    coefficients) for which ``x`` generates the multiplicative group of F_p[x]/(f)."""
    q = p**k
    for code in range(1, q):
        low = tuple((code // p**i) % p for i in range(k))
        if low[0] == 0:
            continue  # divisible by x: not irreducible
        _, mul = _poly_tables(p, k, low)
        x, r, n = p, p, 1  # the element x encodes as p
        while r != 1 and n < q:
            r, n = int(mul[r, x]), n + 1
        if r == 1 and n == q - 1:
            return low
    raise AssertionError(f"no primitive polynomial found for GF({p}^{k})")
