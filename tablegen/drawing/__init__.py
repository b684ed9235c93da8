"""Fabrics drawn as the papers draw them: :mod:`~tablegen.drawing.positions` (the natural
layout of each family as plain data: switch positions in a unit box, every cable with its
kind, group labels; JSON-ready for ``fabroute draw --json`` and the controller's live map)
and :mod:`~tablegen.drawing.render` (that layout as an SVG or PNG with matplotlib:
``fabroute draw``).  Reads topologies only."""
