"""The os-ken application: a thin shell (:mod:`~controller.openflow.app`) around plain classes
that decide (:mod:`~controller.openflow.fabric`) and build OpenFlow messages
(:mod:`~controller.openflow.messages`); :mod:`~controller.openflow.launcher` runs it."""
