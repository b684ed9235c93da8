"""File formats of a verified table set: JSON (:mod:`~tablegen.exports.files`), OpenFlow 1.3
(the program :mod:`~tablegen.exports.openflow` and its text :mod:`~tablegen.exports.openflow_text`)
and InfiniBand (:mod:`tablegen.exports.infiniband`), written through :mod:`~tablegen.exports.writer`."""
