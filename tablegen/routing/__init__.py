"""Routings that turn a topology into a table set: MIN, VAL, VAL_nta, VAL_3h and UGAL-L
(:mod:`~tablegen.routing.build`), DSN-F's own routing, the torus's dimension order, the compiled
table walks (:mod:`~tablegen.routing.walk`) and the UGAL decision rule (:mod:`~tablegen.routing.ugal`)."""
