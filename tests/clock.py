"""A clock the test moves by hand (``clock.t += 1.5``), for plain classes that take a
``clock`` callable instead of reading ``time.monotonic``."""


class Clock:
    def __init__(self, t: float = 0.0):
        self.t = t

    def __call__(self) -> float:
        return self.t
